package skills

import (
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// ErrCommandArgs is returned (wrapped) by Command.Line for arguments that
// do not fit the command's declaration.
var ErrCommandArgs = errors.New("bad arguments")

// Argument types of a skill command.
const (
	ArgString = "string" // any text up to 256 bytes, one line, not starting with "-"
	ArgInt    = "int"    // a decimal integer
	ArgHost   = "host"   // a host name or IP address
	ArgEnum   = "enum"   // one of Values
	// ArgText is the rest of the line (up to 1024 bytes, its words joined
	// by single spaces): a query. Only the last argument of a command that
	// calls a tool may be text.
	ArgText = "text"
)

// reservedCommands are the in-thread commands of the bot; a skill command
// may not take their names.
var reservedCommands = []string{"stop", "clear", "compact", "skills", "status", "help", "audit", "run"}

// hostRule is a DNS host name: labels of letters, digits and hyphens.
var hostRule = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$`)

// placeholder is {name} in a command template.
var placeholder = regexp.MustCompile(`\{([A-Za-z0-9_-]+)\}`)

// Command is a command a skill declares for people to run without the model
// (metadata.thinbot.commands): in a thread, "!NAME ARGS" or "/run NAME ARGS".
// Its command line still goes through the gate, approvals, the sandbox and
// the chain like a model's command.
type Command struct {
	// Name is what people type after "!"; Skill is the skill declaring it
	// and Dir its folder.
	Name, Skill, Dir string
	// Description is one line for /help.
	Description string
	// Script is the absolute path of a script inside the skill folder, run
	// with bash (.sh), python3 (.py) or directly, with the arguments after
	// it. Template is used instead when Script is "".
	Script string
	// Template is a command line in which {ARG} is replaced by the quoted
	// argument and {SKILL_DIR} by the quoted skill folder.
	Template string
	// Tool, instead of Script and Template, is a tool the command calls
	// with its arguments by name (ToolArgs): a datasource tool such as
	// promql_query, which the agent checks when the command runs.
	Tool string
	Args []Arg
}

// Arg is one positional argument of a Command.
type Arg struct {
	Name        string   `json:"name"`
	Type        string   `json:"type"`
	Description string   `json:"description,omitempty"`
	Values      []string `json:"values,omitempty"` // for enum
	Optional    bool     `json:"optional,omitempty"`
}

// Usage is "NAME ARG [OPT]" with enum values shown.
func (c Command) Usage() string {
	parts := []string{c.Name}
	for _, a := range c.Args {
		s := a.Name
		if a.Type == ArgEnum {
			s = strings.Join(a.Values, "|")
		} else if a.Type == ArgText {
			s += "..."
		} else if a.Type != ArgString {
			s += ":" + a.Type
		}
		if a.Optional {
			s = "[" + s + "]"
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, " ")
}

// Line checks args against the declaration and returns the command line,
// every argument shell-quoted.
func (c Command) Line(args []string) (string, error) {
	required := 0
	for _, a := range c.Args {
		if !a.Optional {
			required++
		}
	}
	if len(args) < required || len(args) > len(c.Args) {
		return "", fmt.Errorf("%w: %s takes %d to %d arguments, got %d (usage: %s)", ErrCommandArgs, c.Name, required, len(c.Args), len(args), c.Usage())
	}
	values := map[string]string{}
	for i, v := range args {
		a := c.Args[i]
		if err := a.check(v); err != nil {
			return "", fmt.Errorf("%w: %s: %v (usage: %s)", ErrCommandArgs, a.Name, err, c.Usage())
		}
		values[a.Name] = v
	}
	if c.Script != "" {
		parts := []string{Quote(c.Script)}
		switch filepath.Ext(c.Script) {
		case ".sh":
			parts = append([]string{"bash"}, parts...)
		case ".py":
			parts = append([]string{"python3"}, parts...)
		}
		for _, v := range args {
			parts = append(parts, Quote(v))
		}
		return strings.Join(parts, " "), nil
	}
	line := placeholder.ReplaceAllStringFunc(c.Template, func(m string) string {
		name := m[1 : len(m)-1]
		if name == "SKILL_DIR" {
			return Quote(c.Dir)
		}
		v, ok := values[name]
		if !ok {
			return "''"
		}
		return Quote(v)
	})
	return strings.TrimSpace(line), nil
}

// ToolArgs checks args against the declaration of a command that calls a
// tool and returns them by name, a text argument taking the rest of the
// words and an int argument as a number.
func (c Command) ToolArgs(args []string) (map[string]any, error) {
	if n := len(c.Args); n > 0 && c.Args[n-1].Type == ArgText && len(args) > n {
		args = append(args[:n-1:n-1], strings.Join(args[n-1:], " "))
	}
	required := 0
	for _, a := range c.Args {
		if !a.Optional {
			required++
		}
	}
	if len(args) < required || len(args) > len(c.Args) {
		return nil, fmt.Errorf("%w: %s takes %d to %d arguments, got %d (usage: %s)", ErrCommandArgs, c.Name, required, len(c.Args), len(args), c.Usage())
	}
	out := map[string]any{}
	for i, v := range args {
		a := c.Args[i]
		if err := a.check(v); err != nil {
			return nil, fmt.Errorf("%w: %s: %v (usage: %s)", ErrCommandArgs, a.Name, err, c.Usage())
		}
		out[a.Name] = v
		if a.Type == ArgInt {
			n, _ := strconv.ParseInt(v, 10, 64)
			out[a.Name] = n
		}
	}
	return out, nil
}

func (a Arg) check(v string) error {
	switch a.Type {
	case ArgText:
		if v == "" || len(v) > 1024 || strings.ContainsAny(v, "\x00\r\n") {
			return errors.New("want one line of 1 to 1024 bytes")
		}
		return nil
	case ArgInt:
		if _, err := strconv.ParseInt(v, 10, 64); err != nil {
			return fmt.Errorf("%q is not an integer", v)
		}
		return nil
	case ArgEnum:
		if !slices.Contains(a.Values, v) {
			return fmt.Errorf("%q is not one of %s", v, strings.Join(a.Values, ", "))
		}
		return nil
	case ArgHost:
		if _, err := netip.ParseAddr(v); err == nil {
			return nil
		}
		if len(v) > 253 || !hostRule.MatchString(v) {
			return fmt.Errorf("%q is not a host name or IP address", v)
		}
		return nil
	}
	switch {
	case v == "" || len(v) > 256:
		return errors.New("want 1 to 256 bytes")
	case strings.HasPrefix(v, "-"):
		return fmt.Errorf("%q starts with '-' (it could be read as an option)", v)
	case strings.ContainsAny(v, "\x00\r\n"):
		return errors.New("must be one line")
	}
	return nil
}

// safeWord is a word the shell reads literally without quotes.
var safeWord = regexp.MustCompile(`^[A-Za-z0-9._/:@%+=,-]+$`)

// Quote returns s as one shell word: unchanged when it has only characters
// the shell reads literally, else in single quotes.
func Quote(s string) string {
	if safeWord.MatchString(s) && !strings.HasPrefix(s, "-") {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// commands reads metadata.thinbot.commands. A bad declaration becomes a
// warning and is dropped.
func (l *loader) commands(sk *Skill, warn func(string)) []Command {
	tb, _ := sk.Metadata["thinbot"].(map[string]any)
	raw, ok := tb["commands"]
	if !ok {
		return nil
	}
	list, ok := raw.([]any)
	if !ok {
		warn("metadata.thinbot.commands is not a list: ignored")
		return nil
	}
	var out []Command
	for i, item := range list {
		c, err := l.command(sk, item)
		if err != nil {
			warn(fmt.Sprintf("command %d (%s) ignored: %v", i+1, c.Name, err))
			continue
		}
		if slices.ContainsFunc(out, func(o Command) bool { return o.Name == c.Name }) {
			warn(fmt.Sprintf("command %s declared twice: the second is ignored", c.Name))
			continue
		}
		out = append(out, c)
	}
	return out
}

func (l *loader) command(sk *Skill, item any) (Command, error) {
	m, ok := item.(map[string]any)
	if !ok {
		return Command{}, errors.New("not a mapping")
	}
	c := Command{Name: text(m["name"]), Skill: sk.Name, Dir: sk.Dir, Description: strings.TrimSpace(text(m["description"])), Template: strings.TrimSpace(text(m["command"]))}
	switch {
	case !nameRule.MatchString(c.Name) || len(c.Name) > maxNameLen:
		return c, errors.New("name must be lowercase letters, digits and hyphens")
	case slices.Contains(reservedCommands, c.Name):
		return c, fmt.Errorf("name %q is an in-thread command of thinbot", c.Name)
	}
	script := text(m["script"])
	c.Tool = strings.TrimSpace(text(m["tool"]))
	switch {
	case c.Tool != "" && (script != "" || c.Template != ""):
		return c, errors.New("give tool, script or command, not two of them")
	case c.Tool != "":
		if !nameRule.MatchString(strings.ReplaceAll(c.Tool, "_", "-")) {
			return c, fmt.Errorf("tool %q is not a tool name", c.Tool)
		}
	case script != "" && c.Template != "":
		return c, errors.New("give script or command, not both")
	case script == "" && c.Template == "":
		return c, errors.New("give script or command")
	case script != "":
		rel := strings.TrimPrefix(script, "{SKILL_DIR}/")
		p := filepath.Join(sk.Dir, filepath.FromSlash(rel))
		if filepath.IsAbs(rel) || !inside(sk.Dir, p) {
			return c, errors.New("script must be a path inside the skill folder")
		}
		c.Script = p
	default:
		if strings.ContainsAny(c.Template, "\n\r") {
			return c, errors.New("command must be one line")
		}
	}
	args, _ := m["args"].([]any)
	if m["args"] != nil && args == nil {
		return c, errors.New("args is not a list")
	}
	optional := false
	for _, raw := range args {
		am, ok := raw.(map[string]any)
		if !ok {
			return c, errors.New("an argument is not a mapping")
		}
		a := Arg{Name: text(am["name"]), Type: strings.ToLower(text(am["type"])), Description: text(am["description"]),
			Values: stringList(am["values"], false), Optional: am["optional"] == true}
		if a.Type == "" {
			a.Type = ArgString
		}
		switch {
		case !placeholderName(a.Name) || a.Name == "SKILL_DIR":
			return c, fmt.Errorf("argument name %q: want letters, digits, - and _", a.Name)
		case !slices.Contains([]string{ArgString, ArgInt, ArgHost, ArgEnum, ArgText}, a.Type):
			return c, fmt.Errorf("argument %s: type %q is not string, int, host, enum or text", a.Name, a.Type)
		case a.Type == ArgText && c.Tool == "":
			return c, fmt.Errorf("argument %s: text is for commands that call a tool", a.Name)
		case a.Type == ArgEnum && len(a.Values) == 0:
			return c, fmt.Errorf("argument %s: an enum needs values", a.Name)
		case optional && !a.Optional:
			return c, fmt.Errorf("argument %s: a required argument after an optional one", a.Name)
		}
		for _, v := range a.Values {
			if Quote(v) != v {
				return c, fmt.Errorf("argument %s: enum value %q needs quoting", a.Name, v)
			}
		}
		optional = optional || a.Optional
		c.Args = append(c.Args, a)
	}
	for i, a := range c.Args {
		if a.Type == ArgText && i != len(c.Args)-1 {
			return c, fmt.Errorf("argument %s: only the last argument may be text", a.Name)
		}
	}
	if c.Script == "" && c.Tool == "" {
		for _, m := range placeholder.FindAllStringSubmatch(c.Template, -1) {
			if m[1] != "SKILL_DIR" && !slices.ContainsFunc(c.Args, func(a Arg) bool { return a.Name == m[1] }) {
				return c, fmt.Errorf("command uses {%s}, which is not an argument", m[1])
			}
		}
	}
	return c, nil
}

func placeholderName(s string) bool {
	return s != "" && placeholder.MatchString("{"+s+"}") && len(s) <= 64
}

// Commands returns every loaded skill's commands, sorted by name; when two
// skills declare the same name, the first skill (by name) keeps it.
func (s Set) Commands() []Command {
	var out []Command
	for _, sk := range s.Skills {
		for _, c := range sk.Commands {
			if !slices.ContainsFunc(out, func(o Command) bool { return o.Name == c.Name }) {
				out = append(out, c)
			}
		}
	}
	slices.SortFunc(out, func(a, b Command) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Command returns the skill command called name.
func (s Set) Command(name string) (Command, bool) {
	for _, c := range s.Commands() {
		if c.Name == name {
			return c, true
		}
	}
	return Command{}, false
}
