// Package pool keeps processes ready for requests: each conversation's
// idle process between its messages (warm), and spares, processes
// started ahead of new conversations, in named sets. It decides when a
// spare starts, which process ends when the budget is full, and when a
// process waiting below real work is raised back to it. It knows no
// request: a process is any Proc, a set's shape is opaque (S), both are
// keyed by an opaque fingerprint, and starting and raising a process are
// the caller's functions (Config.Start, Config.Raise). Its lock is its
// own: every exported method may be called from any goroutine.
//
// # Warm processes
//
// A conversation's process goes back to the pool when its request is
// done (Done) and is taken by its next request (TakeIdle); one unused for
// Config.Idle ends. Max bounds the processes kept, spares included, and
// Config.Memory the memory they hold: those worth least, by how lately
// they were wanted, are ended first (budget.go and memory.go, the places
// that decide what has room and what ends first).
//
// # Spares
//
// A CLI started with --input-format stream-json and no input yet does its
// start-up work anyway: it connects its MCP servers and waits on stdin
// (checked on 2.1.328); a first message written then reaches the model in
// ~90 ms, against ~340 ms and more when the process starts with it. Its
// options, the session id among them, are fixed at the spawn, so a spare
// serves only a new conversation of the very shape it was started for
// (the same fingerprint), and that conversation takes the spare's session
// id. What varies per message travels with the message (sysprompt.Note).
//
// Spares are kept in named sets, each of one shape: the set named after a
// bot (its BotID) is the bot's conversations', kept by the driver's Run
// itself (Follow); a caller may keep others (Keep), a panel's for
// example. A bot's new conversations of another shape than its set's, but
// of the same brain (a guest answer has no question tool), get a set of
// their own under the bot's name, kept while they come; only a request of
// another brain (its lineage: the shape but for what a kind of request
// adds) replaces the bot's sets. A set keeps its count ready and grows, up
// to Config.MaxSpares, when new conversations miss it; its spares count
// against Config.Max and are the first ended when the budget is tight,
// callers' sets' before a bot's, and a bot's set lacking a spare ends a
// caller's spare when the budget has no room for its own (rank). One
// goroutine (tend) starts and retires them; each spare has a watcher that
// marks it ready when its process is (Proc.Ready: a CLI that reached
// brainbot's tool server), and replaces it if it dies first.
//
// A CLI's start costs about half a second of CPU, and the CLI goes on
// with its start-up for a while after it reached the tool server. So
// spares start in quiet moments: while requests run, and for spareSettle
// after the last one ended, a spare a set lacks waits, up to spareQuiet
// (a panel's turns follow one another within that, and are not slowed by
// the spares they took being replaced); and no more start at once than
// brainbot has CPUs (its cgroup's quota where lower than the machine's:
// package syscpu).
//
// And spares yield to real work: none starts while a request waits for a
// Claude slot (Config.Waiting), however long a set has lacked one, nor
// while a request's CLI is starting (ColdStart), nor while brainbot's
// CPUs are all wanted (threads of its cgroup, or of the machine, waited
// for one a fifth of the time lately, cpuGauge): while requests of ours
// run, however long; while other work keeps the CPUs busy, up to
// spareCPUPatience. Spare CLIs run at a lower CPU priority (nice +10, the
// caller's Start) until a conversation takes one or waits for it to
// start: Config.Raise brings it back. Measured under saturation, spares
// starting at normal priority made the median answer 1.7 to 2.1 times as
// long (issue 38). Memory bounds them as it bounds the conversations'
// idle processes, in one budget ranked by worth (memory.go), and a
// process started for a request ends the kept ones worth least at once
// where the memory has no room for it; Config.SpareMemoryMB, when set,
// caps the spares' besides.
//
// # Tests
//
// The policy runs on the time package's clock and on Config.CPUBusy, so
// its tests run it in a testing/synctest bubble, whose clock moves only
// when every goroutine waits, with fake processes: no process starts and
// no test waits for real time.
package pool
