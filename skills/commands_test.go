package skills

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const commandsSkill = `---
name: ops
description: Ops routines.
metadata:
  thinbot:
    commands:
      - name: disk
        description: Disk usage of one mount
        script: scripts/disk.sh
        args:
          - {name: host, type: host}
          - {name: mount, type: string, optional: true}
      - name: tail
        description: Last lines of a log
        command: "tail -n {lines} {SKILL_DIR}/logs/{which}.log"
        args:
          - {name: lines, type: int}
          - {name: which, type: enum, values: [app, web]}
      - name: stop
        command: "true"
      - name: bad-type
        command: "echo {x}"
        args: [{name: x, type: float}]
      - name: unknown-placeholder
        command: "echo {y}"
      - name: both
        command: "true"
        script: scripts/disk.sh
      - name: escape
        script: ../other/x.sh
---
Body.
`

func TestCommandsLoad(t *testing.T) {
	root := t.TempDir()
	write(t, filepath.Join(root, "ops/SKILL.md"), commandsSkill)
	set := Load([]string{root}, Options{Probe: Probe{UID: 4242424}})
	if len(set.Skills) != 1 {
		t.Fatalf("filtered %+v", set.Filtered)
	}
	sk := set.Skills[0]
	var names []string
	for _, c := range sk.Commands {
		names = append(names, c.Name)
	}
	if strings.Join(names, ",") != "disk,tail" {
		t.Errorf("commands %q", names)
	}
	warnings := strings.Join(sk.Warnings, "\n")
	for _, w := range []string{`(stop) ignored: name "stop" is an in-thread command`, `(bad-type) ignored: argument x: type "float"`,
		`(unknown-placeholder) ignored: command uses {y}`, `(both) ignored: give script or command, not both`,
		`(escape) ignored: script must be a path inside the skill folder`} {
		if !strings.Contains(warnings, w) {
			t.Errorf("no warning %q in:\n%s", w, warnings)
		}
	}
	if c, ok := set.Command("tail"); !ok || c.Usage() != "tail lines:int app|web" {
		t.Errorf("tail usage %q", c.Usage())
	}
}

func TestCommandLine(t *testing.T) {
	dir := "/srv/skills/ops dir"
	disk := Command{Name: "disk", Dir: dir, Script: dir + "/scripts/disk.sh", Args: []Arg{{Name: "host", Type: ArgHost}, {Name: "mount", Type: ArgString, Optional: true}}}
	tail := Command{Name: "tail", Dir: dir, Template: "tail -n {lines} {SKILL_DIR}/logs/{which}.log", Args: []Arg{{Name: "lines", Type: ArgInt}, {Name: "which", Type: ArgEnum, Values: []string{"app", "web"}}}}
	tests := []struct {
		name string
		c    Command
		args []string
		want string // the line, or the error text
		err  bool
	}{
		{"script, host", disk, []string{"web-01"}, `bash '/srv/skills/ops dir/scripts/disk.sh' web-01`, false},
		{"script, ip and string", disk, []string{"10.0.0.7", "/var/lib/my data"}, `bash '/srv/skills/ops dir/scripts/disk.sh' 10.0.0.7 '/var/lib/my data'`, false},
		{"quote in string", disk, []string{"web-01", "it's; rm -rf /"}, `bash '/srv/skills/ops dir/scripts/disk.sh' web-01 'it'\''s; rm -rf /'`, false},
		{"bad host", disk, []string{"web-01;reboot"}, "is not a host name or IP address", true},
		{"option-like host", disk, []string{"-oProxyCommand=x"}, "is not a host name", true},
		{"option-like string", disk, []string{"web-01", "--delete"}, "starts with '-'", true},
		{"missing arg", disk, nil, "takes 1 to 2 arguments, got 0 (usage: disk host:host [mount])", true},
		{"extra arg", disk, []string{"a", "b", "c"}, "takes 1 to 2 arguments, got 3", true},
		{"template", tail, []string{"50", "web"}, `tail -n 50 '/srv/skills/ops dir'/logs/web.log`, false},
		{"not an int", tail, []string{"5x", "web"}, `"5x" is not an integer`, true},
		{"enum", tail, []string{"5", "db"}, `"db" is not one of app, web`, true},
		{"substitution is quoted", tail, []string{"1", "$(id)"}, "is not one of", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.c.Line(tc.args)
			if tc.err {
				if !errors.Is(err, ErrCommandArgs) || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("err %v, want %q", err, tc.want)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("Line = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

// TestToolCommands: the promql pack's commands call the datasource tools
// with their arguments by name, a text argument taking the rest of the
// line; declarations that mix a tool with a command line, or put text
// before the last argument, are refused.
func TestToolCommands(t *testing.T) {
	set := Load([]string{"."}, Options{Probe: Probe{UID: 4242424}})
	c, ok := set.Command("promql")
	if !ok || c.Tool != "promql_query" {
		t.Fatalf("promql command: %+v %v", c, ok)
	}
	args, err := c.ToolArgs([]string{"sum", "by", "(job)", "(up)"})
	if err != nil || args["query"] != "sum by (job) (up)" || len(args) != 1 {
		t.Errorf("ToolArgs = %v, %v", args, err)
	}
	if _, err := c.ToolArgs(nil); !errors.Is(err, ErrCommandArgs) {
		t.Errorf("no query: %v", err)
	}
	if u := c.Usage(); u != "promql query..." {
		t.Errorf("usage %q", u)
	}
	r, _ := set.Command("promql-range")
	args, err = r.ToolArgs([]string{"6h", "rate(x[5m])", "*", "2"})
	if err != nil || args["window"] != "6h" || args["query"] != "rate(x[5m]) * 2" {
		t.Errorf("promql-range ToolArgs = %v, %v", args, err)
	}
	for _, decl := range []string{
		"{name: x, tool: promql_query, command: echo hi}",
		"{name: x, tool: promql_range, args: [{name: q, type: text}, {name: w}]}",
		"{name: x, command: 'echo {q}', args: [{name: q, type: text}]}",
	} {
		dir := t.TempDir()
		os.MkdirAll(filepath.Join(dir, "s"), 0o755)
		os.WriteFile(filepath.Join(dir, "s", "SKILL.md"), []byte("---\nname: s\ndescription: d\nmetadata:\n  thinbot:\n    commands:\n      - "+decl+"\n---\nbody\n"), 0o644)
		set := Load([]string{dir}, Options{Probe: Probe{UID: 4242424}})
		if len(set.Skills) != 1 || len(set.Skills[0].Commands) != 0 || len(set.Skills[0].Warnings) == 0 {
			t.Errorf("%s: loaded %+v", decl, set.Skills)
		}
	}
}
