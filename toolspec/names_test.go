package toolspec

import "testing"

func TestSplitToolName(t *testing.T) {
	for _, tt := range []struct {
		name, server, tool string
		ok                 bool
	}{
		{"mcp__clock__now", "clock", "now", true},
		{"mcp__clock", "clock", "", true},
		{"mcp__my-server__get__thing", "my-server", "get__thing", true},
		{SpeechTool, SpeechServer, SpeechToolName, true},
		{ImageTool, ImageServer, ImageToolName, true},
		{"Bash", "", "", false},
		{"mcp__", "", "", false},
		{"mcp____x", "", "", false},
	} {
		server, tool, ok := SplitToolName(tt.name)
		if server != tt.server || tool != tt.tool || ok != tt.ok {
			t.Errorf("SplitToolName(%q) = %q, %q, %v; want %q, %q, %v", tt.name, server, tool, ok, tt.server, tt.tool, tt.ok)
		}
	}
	if !OurServer(SpeechServer) || !OurServer(ImageServer) || !OurServer(QuestionServer) || OurServer("clock") {
		t.Error("OurServer is wrong")
	}
}
