// Package layers states the module's dependency direction as code: which
// part of the module a package belongs to and which imports between parts
// are allowed. Its test checks every package of the module (go list), so an
// import against the direction fails the suite.
//
//	cmd → steward/*, saivage/* → shared core → standard library / chosen modules
//
// Within the products: connectors never import the host; Steward and Saivage
// never import each other; nothing imports a binary's package (cmd/).
package layers

import (
	"fmt"
	"strings"
)

// Module is the module path.
const Module = "github.com/agentstack/agentstack"

// Part is where a package sits in the dependency direction.
type Part string

// The parts of the module.
const (
	External  Part = "external" // the standard library and other modules
	Shared    Part = "shared"   // the core both products use
	Steward   Part = "steward"
	Connector Part = "connector" // steward/connectors/...
	Host      Part = "host"      // steward/host
	Saivage   Part = "saivage"
	Binary    Part = "binary" // cmd/...
)

// Of returns the part of an import path.
func Of(path string) Part {
	rel, ok := strings.CutPrefix(path, Module+"/")
	if !ok {
		if path == Module {
			return Shared
		}
		return External
	}
	switch {
	case strings.HasPrefix(rel, "cmd/"):
		return Binary
	case rel == "steward/host" || strings.HasPrefix(rel, "steward/host/"):
		return Host
	case strings.HasPrefix(rel, "steward/connectors/"):
		return Connector
	case strings.HasPrefix(rel, "steward/"):
		return Steward
	case strings.HasPrefix(rel, "saivage/"):
		return Saivage
	}
	return Shared
}

// product reports which product a part belongs to ("" for none).
func product(p Part) string {
	switch p {
	case Steward, Connector, Host:
		return "steward"
	case Saivage:
		return "saivage"
	}
	return ""
}

// Check returns an error when from may not import to.
func Check(from, to string) error {
	pf, pt := Of(from), Of(to)
	switch {
	case pt == External:
		return nil
	case pt == Binary:
		return fmt.Errorf("%s imports %s: nothing imports a binary's package", from, to)
	case pf == Shared && pt != Shared:
		return fmt.Errorf("%s imports %s: the shared core imports no product", from, to)
	case pf == Connector && pt == Host:
		return fmt.Errorf("%s imports %s: connectors never import the host", from, to)
	case product(pf) != "" && product(pt) != "" && product(pf) != product(pt):
		return fmt.Errorf("%s imports %s: Steward and Saivage never import each other", from, to)
	}
	return nil
}
