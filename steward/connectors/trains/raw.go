package trains

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
)

// flexInt is a ViaggiaTreno number that may arrive as a JSON number, a
// numeric string or null. Valid reports whether a value was present.
type flexInt struct {
	V     int64
	Valid bool
}

func (f *flexInt) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) == 0 || string(b) == "null" {
		*f = flexInt{}
		return nil
	}
	s := string(b)
	if b[0] == '"' {
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		s = strings.TrimSpace(s)
		if s == "" {
			*f = flexInt{}
			return nil
		}
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		*f = flexInt{V: n, Valid: true}
		return nil
	}
	// Some fields carry fractional minutes; keep the whole part.
	if x, err := strconv.ParseFloat(s, 64); err == nil {
		*f = flexInt{V: int64(x), Valid: true}
		return nil
	}
	// An unparsable value is treated as absent rather than failing the whole
	// response: these endpoints are not a contractual API.
	*f = flexInt{}
	return nil
}

// flexBool accepts true/false, null and the occasional string form.
type flexBool struct {
	V     bool
	Valid bool
}

func (f *flexBool) UnmarshalJSON(b []byte) error {
	switch strings.Trim(strings.TrimSpace(string(b)), `"`) {
	case "true":
		*f = flexBool{V: true, Valid: true}
	case "false":
		*f = flexBool{V: false, Valid: true}
	default:
		*f = flexBool{}
	}
	return nil
}

// rawRun is the andamentoTreno response (and, for the fields it shares, a
// partenze board row).
type rawRun struct {
	NumeroTreno        flexInt         `json:"numeroTreno"`
	Categoria          string          `json:"categoria"`
	CompNumeroTreno    string          `json:"compNumeroTreno"`
	IDOrigine          string          `json:"idOrigine"`
	CodOrigine         string          `json:"codOrigine"`
	Origine            string          `json:"origine"`
	IDDestinazione     string          `json:"idDestinazione"`
	Destinazione       string          `json:"destinazione"`
	DataPartenzaTreno  flexInt         `json:"dataPartenzaTreno"`
	OrarioPartenza     flexInt         `json:"orarioPartenza"`
	OrarioArrivo       flexInt         `json:"orarioArrivo"`
	Ritardo            flexInt         `json:"ritardo"`
	Arrivato           flexBool        `json:"arrivato"`
	NonPartito         flexBool        `json:"nonPartito"`
	TipoTreno          string          `json:"tipoTreno"`
	Provvedimento      flexInt         `json:"provvedimento"`
	FermateSoppresse   json.RawMessage `json:"fermateSoppresse"`
	UltimoRilevamento  string          `json:"stazioneUltimoRilevamento"`
	OraUltimoRilevam   flexInt         `json:"oraUltimoRilevamento"`
	Fermate            []rawStop       `json:"fermate"`
	BinEffPartenza     *string         `json:"binarioEffettivoPartenzaDescrizione"`
	BinProgPartenza    *string         `json:"binarioProgrammatoPartenzaDescrizione"`
	CompOrarioPartenza string          `json:"compOrarioPartenza"`
}

// rawStop is one entry of andamentoTreno's fermate.
type rawStop struct {
	ID                string   `json:"id"`
	Stazione          string   `json:"stazione"`
	Programmata       flexInt  `json:"programmata"`
	PartenzaTeorica   flexInt  `json:"partenza_teorica"`
	ArrivoTeorico     flexInt  `json:"arrivo_teorico"`
	PartenzaReale     flexInt  `json:"partenzaReale"`
	ArrivoReale       flexInt  `json:"arrivoReale"`
	Ritardo           flexInt  `json:"ritardo"`
	RitardoPartenza   flexInt  `json:"ritardoPartenza"`
	RitardoArrivo     flexInt  `json:"ritardoArrivo"`
	BinEffPartenza    *string  `json:"binarioEffettivoPartenzaDescrizione"`
	BinProgPartenza   *string  `json:"binarioProgrammatoPartenzaDescrizione"`
	BinEffArrivo      *string  `json:"binarioEffettivoArrivoDescrizione"`
	BinProgArrivo     *string  `json:"binarioProgrammatoArrivoDescrizione"`
	TipoFermata       string   `json:"tipoFermata"`
	ActualFermataType flexInt  `json:"actualFermataType"`
	Soppressa         flexBool `json:"soppressa"`
}

// measured reports whether ViaggiaTreno detected the train at this stop:
// an unreached stop carries zero delays that are not measurements.
func (s *rawStop) measured() bool {
	return s.ArrivoReale.Valid || s.PartenzaReale.Valid || (s.ActualFermataType.Valid && s.ActualFermataType.V == 1)
}

// str trims a nullable platform string; ViaggiaTreno pads some with spaces.
func str(p *string) string {
	if p == nil {
		return ""
	}
	return strings.TrimSpace(*p)
}

// suppressedIDs reads fermateSoppresse, which has been seen as a list of
// station ids and as a list of stop objects.
func suppressedIDs(raw json.RawMessage) map[string]bool {
	out := map[string]bool{}
	var ids []string
	if json.Unmarshal(raw, &ids) == nil {
		for _, id := range ids {
			out[strings.TrimSpace(id)] = true
		}
		return out
	}
	var objs []struct {
		ID string `json:"id"`
	}
	if json.Unmarshal(raw, &objs) == nil {
		for _, o := range objs {
			out[strings.TrimSpace(o.ID)] = true
		}
	}
	return out
}
