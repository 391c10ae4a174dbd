package mcpbridge_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"

	"github.com/agentstack/agentstack/mcpbridge"
)

func ExampleLoadConfig() {
	servers, err := mcpbridge.LoadConfig("testdata/mcp.json")
	if err != nil {
		log.Fatal(err)
	}
	for _, s := range servers {
		fmt.Println(s.Name, s.Transport())
	}
	// Output:
	// everything stdio
	// files stdio
	// remote http
}

func ExampleToolName() {
	fmt.Println(mcpbridge.ToolName("files", "read_file"))
	fmt.Println(mcpbridge.ToolName("files", "read.file"))
	// Output:
	// mcp__files__read_file
	// mcp__files__read_file_dd32cdf5
}

// A host starts the bridge once, takes a tool snapshot at the start of each
// turn and shows Status on its System page.
func ExampleBridge() {
	servers, err := mcpbridge.LoadConfig("/path/to/STEWARD_HOME/mcp.json")
	if err != nil {
		log.Fatal(err) // a bad mcp.json stops start-up with a message naming server and field
	}
	bridge := mcpbridge.New(mcpbridge.Options{Servers: servers, Logger: slog.Default()})
	bridge.Start(context.Background())
	defer bridge.Close()

	tools := bridge.Tools() // per turn: servers that connected since appear here
	fmt.Println(len(tools))
	for _, st := range bridge.Status() {
		fmt.Println(st.Name, st.State, st.Tools, st.LastError)
	}
}
