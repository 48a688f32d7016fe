// Renders an Ollama TEMPLATE for a conversation with Go's text/template, as Ollama does:
// stdin is {"template": "...", "messages": [{"role": "...", "content": "..."}]}; the
// Modelfile's SYSTEM, if any, is already the first message (Ollama's routes.go puts it there).
package main

import (
	"encoding/json"
	"os"
	"text/template"
)

type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// The values Ollama's template package offers a template (the ones a chat needs).
type Values struct {
	Messages []Message
	System   string
	Prompt   string
	Response string
}

func main() {
	var in struct {
		Template string    `json:"template"`
		Messages []Message `json:"messages"`
	}
	if err := json.NewDecoder(os.Stdin).Decode(&in); err != nil {
		panic(err)
	}
	tmpl := template.Must(template.New("").Option("missingkey=zero").Parse(in.Template))
	if err := tmpl.Execute(os.Stdout, Values{Messages: in.Messages}); err != nil {
		panic(err)
	}
}
