package mcp

import (
	"context"
	"errors"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
	"go.uber.org/zap"

	"brainbot/ticket"
	"brainbot/toolspec"
)

// AskedAlready is the error result of a second question in one answer.
const AskedAlready = "you asked a question already: end your turn and wait for the user's answer"

// questionToolSchema is ask_question as the model sees it.
func questionToolSchema() mcpgo.Tool {
	return mcpgo.NewTool(toolspec.QuestionToolName,
		mcpgo.WithDescription(toolspec.QuestionDescription),
		mcpgo.WithString("question", mcpgo.Required(), mcpgo.Description("The question, short and plain (no options in it).")),
		mcpgo.WithArray("options", mcpgo.Required(), mcpgo.WithStringItems(),
			mcpgo.MinItems(toolspec.MinOptions), mcpgo.MaxItems(toolspec.MaxOptions),
			mcpgo.Description("The answers to choose from, each a few words on one line: the text of its button.")),
	)
}

// question serves ask_question: it checks the question and takes the
// request's leave to ask one. It records nothing itself: the call, as the
// CLI reports it, is the question the bot shows (the pipeline reads it
// from the request's tool calls), so only a call this answers without an
// error counts.
func (g *gate) question(ctx context.Context, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
	var args toolspec.QuestionArgs
	if err := req.BindArguments(&args); err != nil {
		return mcpgo.NewToolResultError("question and options are required: " + err.Error()), nil
	}
	// A question the model can fix does not use up its leave.
	if err := args.Check(); err != nil {
		return mcpgo.NewToolResultError(err.Error()), nil
	}
	token, _ := ctx.Value(tokenKey{}).(string)
	log, err := g.tickets.ClaimQuestion(token)
	if log == nil {
		log = g.log
	}
	switch {
	case errors.Is(err, ticket.ErrAskedAlready):
		log.Info("second question of an answer refused", zap.String("tool", toolspec.QuestionToolName))
		return mcpgo.NewToolResultError(AskedAlready), nil
	case err != nil:
		log.Warn("tool call refused", zap.String("tool", toolspec.QuestionToolName), zap.Error(err))
		return mcpgo.NewToolResultError(NotAskedFor), nil
	}
	log.Debug("question asked", zap.String("question", args.Question), zap.Strings("options", args.Options))
	return mcpgo.NewToolResultText(toolspec.QuestionAsked), nil
}
