package claude

// The driver's side of its pool (package pool): what of a Request a
// process is started with (its shape, fingerprint and lineage), and the
// spares and prewarmed processes it keeps with it.

import (
	"errors"
	"maps"
	"slices"

	"github.com/google/uuid"
	"go.uber.org/zap"

	"brainbot/claude/pool"
	"brainbot/reaper"
	"brainbot/sysprompt"
)

// ErrNoRoom means the warm-process budget (WarmConfig.Max) has no room
// for another process.
var ErrNoRoom = pool.ErrNoRoom

// SpareStats says how the spares fare, for metrics.
type SpareStats = pool.Stats

// newPool is the driver's pool of warm processes and spares: it starts a
// spare of a Request's shape with a session of its own, below real work.
func (d *Driver) newPool() *pool.Pool[*live, Request] {
	cfg := d.cfg.Warm.poolConfig()
	cfg.Start = func(shape Request) (*live, error) {
		shape.SessionID = uuid.NewString()
		return d.spawn(shape, d.fingerprint(shape), d.procs.StartLow)
	}
	cfg.Raise, cfg.Differs = d.raise, shapeDiffers
	cfg.Waiting, cfg.CPUBusy, cfg.Log = d.cfg.Waiting, d.cfg.cpuBusy, d.log
	return pool.New(cfg)
}

// spec is what a set of spares of req's shape is kept for.
func (d *Driver) spec(req Request) pool.Spec[Request] {
	return pool.Spec[Request]{Shape: shapeOf(req), Fingerprint: d.fingerprint(req), Lineage: d.lineage(req), Bot: req.BotID}
}

// KeepSpares keeps n spares of shape ready under the name set: CLI
// processes started ahead of new conversations, each with a session of
// its own. A request that lets the driver name its session (SessionID
// empty, Resume false) and has shape's fingerprint takes one, when one
// is ready, and its session is the spare's; a replacement starts in the
// background. shape is a Request as Run would get it: what the process
// is started with counts (system prompt, model, bot, MCP servers, allowed
// tools, tool timeout, max turns, JSON schema), the rest is ignored. A
// set of another brain under that name (another system prompt, model or
// tools) is replaced, one of the same brain but another shape is kept
// beside it while its spares are taken, and n == 0 drops the name's sets
// (so does DropSpares).
//
// Run keeps the set of each bot's conversations itself, named by the
// bot's id (WarmConfig.Spares of them): made by the first request of a
// conversation that lets the driver name its session, and replaced when
// a request of a conversation comes of another brain (an edited one); a
// new conversation of the same brain but another shape (a guest answer,
// without the question tool) gets a set of its own, of as many spares,
// dropped once they sit unused for SpareIdle (at most maxShapes sets a
// bot).
// A caller keeps sets for other shapes, with names that are no bot id
// (containing "/"), e.g. a panel member's turns. Nothing is kept when
// spares are off (WarmConfig.Spares 0, or Max 0).
func (d *Driver) KeepSpares(set string, shape Request, n int) error {
	if err := d.checkShape(set, shape); err != nil {
		return err
	}
	d.pool.Keep(set, d.spec(shape), n)
	return nil
}

func (d *Driver) checkShape(set string, shape Request) error {
	switch {
	case set == "":
		return errors.New("claude: a set of spares needs a name")
	case shape.Resume || shape.SessionID != "":
		return errors.New("claude: spares are for new conversations: the shape names no session")
	}
	return checkRequest(shapeOf(shape))
}

// DropSpares ends the spares of set and forgets it: for a bot whose brain
// is gone, name the set by its id.
func (d *Driver) DropSpares(set string) {
	d.pool.Keep(set, pool.Spec[Request]{}, 0)
}

// SpareStats says how many spares are ready and how they served so far.
func (d *Driver) SpareStats() SpareStats { return d.pool.Stats() }

// PrewarmResume starts, in the background, the CLI process that resumes
// req's conversation (req.Resume, req.SessionID and req.Conversation set,
// as for its next Run), so that its next message finds it warm: for the
// most recently active conversations after a restart, whose processes
// ended with the last brainbot, or taken from another instance. It starts
// at the spares' lower CPU priority, raised by the request that takes
// it. The process is the conversation's warm one from now on (WarmConfig:
// idle rules, recycling). It returns
// ErrNoRoom, and starts nothing, when the budget could hold it only by
// ending another conversation's process (spares are ended for it), and
// nil without starting anything when the conversation has its process
// already.
func (d *Driver) PrewarmResume(req Request) error {
	switch err := checkRequest(req); {
	case err != nil:
		return err
	case !req.Resume || req.Conversation == "":
		return errors.New("claude: PrewarmResume is for a resumed conversation (Resume, SessionID and Conversation set)")
	}
	// Below real work, as a spare: after a failover every conversation
	// taken is prewarmed at once, while the messages being answered need
	// the CPUs most.
	return d.pool.Prewarm(req.Conversation, func() (*live, error) { return d.spawn(req, d.fingerprint(req), d.procs.StartLow) })
}

// ReadySpares is how many spares of bot's own conversations' shape (the
// set Run keeps under its id, not a guest answer's) are ready now.
func (d *Driver) ReadySpares(bot string) int { return d.pool.Ready(bot) }

// Expect tells the driver that a message of conversation waits for a
// Claude slot: its process, if one was started ahead for it below real
// work (PrewarmResume), is raised now, so that it finishes starting while
// the message waits rather than once it has a slot.
func (d *Driver) Expect(conversation string) { d.pool.Expect(conversation) }

// followSpares lets the sets of req's bot follow req's shape when it is
// a request of a conversation (see KeepSpares).
func (d *Driver) followSpares(req Request) {
	if req.Conversation == "" || !d.pool.SparesOn() {
		return
	}
	fresh := req.SessionID == "" && !req.Resume
	d.pool.Follow(req.BotID, d.spec(req), d.cfg.Warm.Spares, fresh)
}

// lineage is what of req's shape its brain gives: its fingerprint but for
// what a kind of request adds (a conversation's question tool, a panel
// turn's schema). Shapes of one lineage are requests of one brain; another
// lineage is another brain, or an edited one.
func (d *Driver) lineage(req Request) string {
	req.Questions, req.JSONSchema = false, ""
	return d.fingerprint(req)
}

// raise brings a spare taken for a conversation, or one a conversation
// waits for, or a prewarmed conversation's process taken by its request,
// back to brainbot's CPU priority, in the background (it reads
// /proc): where the rlimit allows
// it (systemd's LimitNICE=+0, as in deploy/brainbot.service) or
// privilege. Else the conversation's CLI stays at nice +10, said once.
func (d *Driver) raise(cli *live) {
	if err := d.procs.Raise(cli.p.Pid()); err != nil && !errors.Is(err, reaper.ErrClosed) {
		d.raiseFailed.Do(func() {
			d.log.Info("claude: CLIs started ahead of their request (spares, prewarmed conversations) keep their lower CPU priority (nice +10) once a request takes them: brainbot may not raise them back (LimitNICE=+0 in its systemd unit allows it)", zap.Error(err))
		})
	}
}

// shapeOf is what of req a process is started with, but its session: a
// spare's shape. Of the prompt's variables only those that hold for the
// bot are kept (the others reach the process with each message).
func shapeOf(req Request) Request {
	vars := maps.Clone(req.PromptVars)
	maps.DeleteFunc(vars, func(name, _ string) bool { return slices.Contains(sysprompt.PerMessage(), name) })
	return Request{
		Mode:         Text,
		SystemPrompt: req.SystemPrompt,
		PromptVars:   vars,
		Model:        req.Model,
		BotID:        req.BotID,
		MCPServers:   req.MCPServers,
		AllowedTools: req.AllowedTools,
		ToolTimeout:  req.ToolTimeout,
		MaxTurns:     req.MaxTurns,
		Questions:    req.Questions,
		Memory:       req.Memory,
		JSONSchema:   req.JSONSchema,
	}
}

// shapeDiffers names the options shapes a and b of one lineage differ in.
func shapeDiffers(a, b Request) []string {
	var differs []string
	if a.Questions != b.Questions {
		differs = append(differs, "questions")
	}
	if a.JSONSchema != b.JSONSchema {
		differs = append(differs, "json_schema")
	}
	return differs
}
