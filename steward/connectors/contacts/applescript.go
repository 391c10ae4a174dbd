package contacts

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/agentstack/agentstack/steward/osascript"
	"github.com/agentstack/agentstack/steward/writeops"
)

// scriptRefused is the error number the Contacts.app scripts raise for a
// check that fails before anything is changed.
const scriptRefused = 7001

// contactsScript builds the Contacts.app script of a plan. An update names
// the person by the native person id (never Steward's index uid); every
// value is quoted by osascript.Quote.
func contactsScript(p *Plan) (string, error) {
	v := p.Values
	var b strings.Builder
	b.WriteString("tell application \"Contacts\"\n")
	if p.Op == "create" {
		var props []string
		for _, f := range []struct {
			name string
			v    *string
		}{{"first name", v.First}, {"last name", v.Last}, {"nickname", v.Nickname}, {"organization", v.Organization},
			{"job title", v.Title}, {"note", v.Notes}} {
			if deref(f.v) != "" {
				props = append(props, f.name+":"+osascript.Quote(*f.v))
			}
		}
		if v.First == nil && v.Last == nil && deref(v.Organization) != "" {
			props = append(props, "company:true")
		}
		b.WriteString("set p to make new person with properties {" + strings.Join(props, ", ") + "}\n")
	} else {
		id := osascript.Quote(p.NativeID)
		fmt.Fprintf(&b, "if not (exists person id %s) then error %s number %d\n", id,
			osascript.Quote("person "+p.NativeID+" is not in Contacts; nothing was changed"), scriptRefused)
		b.WriteString("set p to person id " + id + "\n")
		for _, f := range []struct {
			name string
			v    *string
		}{{"first name", v.First}, {"last name", v.Last}, {"nickname", v.Nickname}, {"organization", v.Organization},
			{"job title", v.Title}, {"note", v.Notes}} {
			if f.v != nil {
				b.WriteString("set " + f.name + " of p to " + osascript.Quote(*f.v) + "\n")
			}
		}
	}
	if v.Birthday != nil {
		if *v.Birthday == "" {
			b.WriteString("set birth date of p to missing value\n")
		} else {
			d, _ := time.Parse(time.DateOnly, *v.Birthday)
			b.WriteString(osascript.SetDate("bd", d.Add(12*time.Hour), time.UTC)) // noon: no zone shifts the day
			b.WriteString("set birth date of p to bd\n")
		}
	}
	list := func(kind string, n int, props func(i int) string) {
		if p.Op != "create" {
			b.WriteString("delete every " + kind + " of p\n")
		}
		for i := range n {
			b.WriteString("make new " + kind + " at end of " + kind + "s of p with properties {" + props(i) + "}\n")
		}
	}
	label := func(l string) string {
		if l == "" {
			l = "other"
		}
		return "label:" + osascript.Quote(l)
	}
	if v.Emails != nil {
		es := *v.Emails
		list("email", len(es), func(i int) string { return label(es[i].Label) + ", value:" + osascript.Quote(es[i].Value) })
	}
	if v.Phones != nil {
		ps := *v.Phones
		list("phone", len(ps), func(i int) string { return label(ps[i].Label) + ", value:" + osascript.Quote(ps[i].Value) })
	}
	if v.Addresses != nil {
		as := *v.Addresses
		list("address", len(as), func(i int) string {
			a := as[i]
			return label(a.Label) + ", street:" + osascript.Quote(a.Street) + ", city:" + osascript.Quote(a.City) + ", state:" +
				osascript.Quote(a.Region) + ", zip:" + osascript.Quote(a.Postcode) + ", country:" + osascript.Quote(a.Country)
		})
	}
	b.WriteString("save\nreturn id of p\nend tell\n")
	return b.String(), nil
}

// checkAppleValues refuses what Contacts.app cannot set: its displayed name
// is composed from the name fields.
func checkAppleValues(v Contact, composed string) error {
	if v.FullName != nil && *v.FullName != composed && v.First == nil && v.Last == nil {
		return errors.New("Contacts.app composes the displayed name from first and last: set those instead of fullName")
	}
	return nil
}

func runContactsScript(ctx context.Context, r osascript.Runner, p *Plan) (string, error) {
	script, err := contactsScript(p)
	if err != nil {
		return "", writeops.NotDone(err)
	}
	out, err := r.Run(ctx, script)
	var se *osascript.Error
	switch {
	case errors.As(err, &se) && se.Number == scriptRefused:
		return "", writeops.NotDone(se)
	case err != nil:
		return "", fmt.Errorf("Contacts.app: %w", err)
	}
	return strings.TrimSpace(out), nil
}
