package operator

import "net/http"

func newCockpit() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "NotFound", "no route "+r.Method+" "+r.URL.Path)
	})
}
