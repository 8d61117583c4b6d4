// Package skills reads skill folders: a SKILL.md with YAML frontmatter
// (name, description, requires, and the fields other agents use) and
// Markdown instructions for the model, plus optional scripts/, references/
// and assets/. It is a leaf package: it imports nothing of thinbot's.
//
// # Loading
//
// Load walks the search path once at start (there is no hot reload): every
// folder directly under each search-path folder that holds a SKILL.md is a
// candidate. Broken files, unmet requirements and unreadable folders are
// hidden from the model and listed in Set.Filtered with a one-line reason; an
// earlier skill of the same name shadows a later one (Set.Shadowed). Skills
// written for Claude Code, Codex or OpenClaw in the open Agent Skills format
// load unchanged, including OpenClaw's metadata.openclaw.requires gating.
//
// # Progressive disclosure
//
// The system prompt holds only the index (Set.IndexWith): one line per
// skill within a byte budget (IndexOptionsFor: 2% of the context window at
// the EstimateTokens rule of 4 bytes per token, growing to 8% so that every
// skill keeps at least FloorDescription bytes of description). Skills are
// ranked against the session's first message (Set.Rank, shared words): the
// best matches keep long lines; when even the short ones do not fit, the
// least relevant skills are named on one trailing line. The index depends
// only on the Set and the first message, so it is the same for every run
// of a session. The skill tool returns Skill.Text, the body with
// the skill-folder placeholders filled in ({SKILL_DIR}, OpenClaw's {baseDir},
// Claude Code's ${CLAUDE_SKILL_DIR}, ${SKILL_DIR}, {{skillDir}}) and the
// skill's file list.
//
// Load reads only each SKILL.md's frontmatter; the body is read when the
// skill is opened (Skill.ReadBody). An edited body is therefore served as
// edited, without a restart, while the name, description and requirements
// stay those read at start; a SKILL.md removed, broken or swapped for a
// symlink out of its folder after the start gives a clear error instead.
//
// # Read-only scripts
//
// A skill may declare some of its own scripts read-only
// (metadata.thinbot.read-only-scripts, or a top-level read-only-scripts).
// Load keeps only paths that resolve inside the skill folder to regular files
// the bot's user cannot change; Set.ReadOnlyScripts gives them to the gate,
// which then passes `bash PATH …` or `python3 PATH …` for exactly those paths.
// See README.md in this folder for the authoring rules.
//
// The sub-folders of this package's directory are the skill packs shipped
// with thinbot (csv-stats, sys-doctor, log-triage, promql, skill-author). They are
// embedded in the binary; Install writes them out (thinbot skills install
// DIR) owned by the installing user and not writable by the bot's user.
package skills
