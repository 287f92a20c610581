// Command brainbot runs Telegram persona bots on the Claude Code CLI: one
// process, many bots, a brain file each, every message answered by the
// real claude CLI.
//
//	brainbot COMMAND [flags] [arguments]
//
// # Commands
//
//	run      run every bot in the brains folder (the service)
//	doctor   check what run needs (CLI, credentials, folders, tokens) and print each check
//	init     set up a first bot, guided: env file, brain, then doctor
//	chat     talk to one brain file in the terminal, without Telegram or a token
//	check    validate brain and panel files (file:line per problem); -connect starts their MCP servers and lists their tools
//	backup   copy the state database to a file while brainbot runs
//	usage    what the bots cost: requests, tokens and USD per brain (-since 7d)
//	conversations  list the running service's conversations; conversations show prints one (asks through its admin socket)
//	forget   have the running service forget a user, as their /forget does (asks through its admin socket)
//	status   what each bot of the running service does, through its admin socket (/status); exits 1 when one does not run as its brain says
//	carry    carry the conversations (sessions, transcripts, /voice choices) from a cluster into one instance's SQLite file (-to sqlite), or back (-to cluster), the service stopped
//	mcp      serve tts, image-gen or clock on stdio; mcp exec starts a brain's MCP server with only its own environment
//	version  print brainbot's version and the Claude Code CLI's (also -version, --version)
//	help     print the usage (also -h, -help, --help)
//
// "brainbot COMMAND -h" lists a command's flags. Every command but mcp
// takes -env-file FILE: a file of KEY=value lines, as systemd's
// EnvironmentFile= reads it, whose variables win over the environment; a
// flag wins over both.
//
// # Environment
//
// The settings (config.go), each with the flag that mirrors it: run and
// doctor take every flag, the other commands those of the settings they
// use. Defaults are in brackets.
//
//	BRAINBOT_BRAINS (-brains)                    folder of brain files [./brains]
//	BRAINBOT_PANELS (-panels)                    folder of panel files (/panel in groups); it need not exist [./panels]
//	BRAINBOT_DATA (-data)                        state root: the database, voice notes, images, the CLIs' folders [./data]
//	TELEGRAM_API_URL (-telegram-api-url)         Bot API base URL [https://api.telegram.org]
//	CLAUDE_CMD (-claude-cmd)                     the Claude Code CLI [claude]
//	BRAINBOT_CLAUDE_BARE (-claude-bare)          run the CLI with --bare: on, off, or auto (on with an API key or a cloud provider) [auto]
//	OPENAI_BASE_URL (-openai-base-url)           OpenAI API base URL [OpenAI's]
//	BRAINBOT_SPEECH_EARLY (-speech-early)        on: speak voice answers (and panels) while the model writes; off: after [on]
//	BRAINBOT_LOG_LEVEL (-log-level)              debug, info, warn or error [info]
//	BRAINBOT_LOG_FORMAT (-log-format)            json or console [console on a terminal, else json]
//	BRAINBOT_LOG_FILE (-log-file)                also write logs to this file, rotated
//	BRAINBOT_MAX_CLAUDE (-max-claude)            Claude processes running at once [4, fewer where the memory holds fewer]
//	BRAINBOT_MAX_WAITING (-max-waiting)          requests of one bot that may wait for a Claude process [50]
//	BRAINBOT_MAX_WAIT (-max-wait)                how long a request may wait for one [2m]
//	BRAINBOT_MAX_WARM (-max-warm)                conversations whose CLI process is kept between messages [as many as the memory holds]
//	BRAINBOT_WARM_IDLE (-warm-idle)              how long an unused warm process is kept [10m]
//	BRAINBOT_SPARES (-spares)                    CLI processes each bot starts ahead of new conversations [1]
//	BRAINBOT_SPARES_MEMORY (-spares-memory)      optional cap on all spares' memory: 25% of memory or 400MB [none]
//	BRAINBOT_SPARE_IDLE (-spare-idle)            how long an unused spare is kept [10m]
//	BRAINBOT_HTTP_ADDR (-http-addr)              serve /healthz, /readyz, /metrics here (the admin's calls with the token); loopback unless BRAINBOT_ADMIN_TOKEN [off]
//	BRAINBOT_ADMIN_SOCKET (-admin-socket)        the admin socket: status, conversations and forget ask here [admin.sock in the data folder]
//	BRAINBOT_GRACE (-grace)                      on SIGTERM, how long requests in flight may finish [30s]
//	BRAINBOT_AUDIO_MAX_AGE (-audio-max-age)      delete voice notes older than this [0: keep]
//	BRAINBOT_AUDIO_MAX_MB (-audio-max-mb)        keep at most this many MB of voice notes [0: no limit]
//	BRAINBOT_IMAGE_MAX_AGE (-image-max-age)      delete images older than this [0: keep]
//	BRAINBOT_IMAGE_MAX_MB (-image-max-mb)        keep at most this many MB of images [0: no limit]
//	BRAINBOT_NATS_URL (-nats-url)                share the bots with other instances through NATS JetStream [alone, SQLite]
//	BRAINBOT_NATS_PARTITIONS (-nats-partitions)  partitions the conversations are spread over [16]
//	BRAINBOT_NATS_REPLICAS (-nats-replicas)      copies JetStream keeps of brainbot's streams and buckets [1]
//	BRAINBOT_INSTANCE (-instance)                this instance's name among them [host name and process id]
//	BRAINBOT_WEBHOOK_URL (-webhook-url)          have Telegram post updates to <this URL>/<bot id> [poll]
//	BRAINBOT_WEBHOOK_ADDR (-webhook-addr)        where this instance listens for them [:8443]
//
// Secrets have no flag (flags show in ps):
//
//	OPENAI_API_KEY          the voice and image tools, and voice messages in
//	BRAINBOT_ADMIN_TOKEN    the admin address's token (a browser signs in at /login); needed off loopback and for the admin's calls there
//
// Read as well, and passed on to the Claude CLI with the model provider's
// other variables (package claude's allow-list):
//
//	ANTHROPIC_API_KEY        the model's API key; BRAINBOT_CLAUDE_BARE=auto then runs the CLI with --bare
//	CLAUDE_CODE_USE_BEDROCK  a cloud provider, as CLAUDE_CODE_USE_VERTEX and CLAUDE_CODE_USE_FOUNDRY: --bare too
//	CLAUDE_CODE_OAUTH_TOKEN  a subscription's token (claude setup-token); init writes it, or the API key, to the env file
//
// CLAUDE_CONFIG_DIR, else HOME/.claude, is where the preflight (doctor,
// and run before it starts) finds the operator's own claude login, to say
// that it does not reach the bots: each bot's CLI has folders of its own.
//
// Each brain names more: the variable of its bot token (telegram.token_env)
// and the ${VAR} references of its mcp_servers.
package main
