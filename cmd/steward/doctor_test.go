package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentstack/agentstack/steward/chats"
)

// TestDoctor finds a home other users can read, a token file with open
// permissions and a broken certificate setting, each with its fix, and
// passes once they are fixed.
func TestDoctor(t *testing.T) {
	vars := map[string]string{"STEWARD_TLS_CERT": "/nonexistent/cert.pem", "STEWARD_TLS_KEY": "/nonexistent/key.pem"}
	env, out, _ := testEnv(t, vars)
	home := vars["STEWARD_HOME"]
	os.MkdirAll(home, 0o755)
	os.Chmod(home, 0o755)
	st, err := chats.Open(context.Background(), filepath.Join(home, "chats.db"))
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	os.WriteFile(filepath.Join(home, "auth-token"), []byte("0123456789abcdef0123\n"), 0o644)

	if code := run(context.Background(), []string{"doctor", "--json", "--offline"}, env); code != 1 {
		t.Fatalf("doctor exit %d, want 1\n%s", code, out)
	}
	var rep struct {
		OK     bool
		Checks []doctorCheck
	}
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	find := func(name string) doctorCheck {
		for _, c := range rep.Checks {
			if c.Name == name {
				return c
			}
		}
		t.Fatalf("no check %q in %+v", name, rep.Checks)
		return doctorCheck{}
	}
	if c := find("home"); c.Status != checkError || c.Fix != "chmod 700 "+home {
		t.Errorf("home check = %+v", c)
	}
	if c := find("file auth-token"); c.Status != checkError || !strings.HasPrefix(c.Fix, "chmod 600 ") {
		t.Errorf("token check = %+v", c)
	}
	if c := find("https"); c.Status != checkError || !strings.Contains(c.Detail, "STEWARD_TLS_CERT") {
		t.Errorf("https check = %+v", c)
	}
	if c := find("store chats"); c.Status != checkOK || !strings.Contains(c.Detail, "schema version") {
		t.Errorf("chats store check = %+v", c)
	}
	if c := find("store usage"); c.Status != checkWarn || c.Fix != "run steward serve once" {
		t.Errorf("missing usage store = %+v", c)
	}
	if rep.OK {
		t.Error("ok with failed checks")
	}

	os.Chmod(home, 0o700)
	os.Chmod(filepath.Join(home, "auth-token"), 0o600)
	env2, out2, _ := testEnv(t, map[string]string{"STEWARD_HOME": home})
	if code := run(context.Background(), []string{"doctor", "--offline"}, env2); code != 0 {
		t.Errorf("doctor after the fixes: exit %d\n%s", code, out2)
	}
	if !strings.Contains(out2.String(), "store chats") {
		t.Errorf("text output:\n%s", out2)
	}
}
