package main

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/thinbot/thinbot/agentcore/sandbox"
	"github.com/thinbot/thinbot/tests/fakemodel"
)

// fileKeys lists, for every field of t (recursively) whose YAML key names
// a file (ends in _file or _files) or that carries a secret tag, its YAML
// path and its secret tag.
func fileKeys(t reflect.Type, where string, out map[string]string) {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return
	}
	for f := range t.Fields() {
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		key := strings.TrimPrefix(where+"."+name, ".")
		tag, tagged := f.Tag.Lookup("secret")
		if tagged || strings.HasSuffix(name, "_file") || strings.HasSuffix(name, "_files") {
			out[key] = tag
		}
		fileKeys(f.Type, key, out)
	}
}

// fillSecretFiles sets every secret:"file" field of v to a path naming
// its key (growing slices of structs to one element to reach their
// fields), and returns the paths set.
func fillSecretFiles(v reflect.Value, where string, set map[string]string) {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		fillSecretFiles(v.Elem(), where, set)
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Struct {
			if v.Len() == 0 {
				v.Set(reflect.Append(v, reflect.New(v.Type().Elem()).Elem()))
			}
			fillSecretFiles(v.Index(0), where+"[0]", set)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			f := v.Type().Field(i)
			if !f.IsExported() {
				continue
			}
			name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			key := strings.TrimPrefix(where+"."+name, ".")
			fv := v.Field(i)
			if f.Tag.Get("secret") == "file" {
				p := "/secret/" + key
				switch fv.Kind() {
				case reflect.String:
					fv.SetString(p)
				case reflect.Slice:
					fv.Set(reflect.Append(fv, reflect.ValueOf(p)))
				}
				set[key] = p
				continue
			}
			fillSecretFiles(fv, key, set)
		}
	}
}

// TestEverySecretFileKeyIsHidden: every config key that names a file has
// decided whether the file holds a secret (secret:"file" or secret:"no"),
// and every secret file is in the set the sandbox hides and the gate
// protects. A new *_file key without the tag fails here; so would a
// secret key that the derivation missed (web.tokens_file was, once).
func TestEverySecretFileKeyIsHidden(t *testing.T) {
	keys := map[string]string{}
	fileKeys(reflect.TypeFor[daemonConfig](), "", keys)
	for key, tag := range keys {
		if tag != "file" && tag != "no" {
			t.Errorf("config key %s names a file but has no secret:\"file\" or secret:\"no\" tag: say whether it holds a secret (secret:\"file\" hides it from every command)", key)
		}
	}
	for _, want := range []string{"model.api_key_file", "mattermost.token_file", "slack.bot_token_file", "slack.app_token_file",
		"slack.signing_secret_file", "web.tokens_file", "secret_files", "alerts.alertmanager.bearer_token_file", "alerts.alertmanager.basic_auth.password_file"} {
		if keys[want] != "file" {
			t.Errorf("%s is not tagged secret:\"file\" (tag %q)", want, keys[want])
		}
	}
	var c daemonConfig
	c.StateDir = "/var/lib/thinbot"
	set := map[string]string{}
	fillSecretFiles(reflect.ValueOf(&c).Elem(), "", set)
	if len(set) < 7 {
		t.Fatalf("filled only %v", set)
	}
	hidden := c.protectedPaths("/etc/thinbot/thinbot.yaml")
	for key, p := range set {
		if !slices.Contains(hidden, p) {
			t.Errorf("%s (%s) is not hidden: %v", key, p, hidden)
		}
	}
	for _, p := range []string{"/var/lib/thinbot", "/etc/thinbot/thinbot.yaml"} {
		if !slices.Contains(hidden, p) {
			t.Errorf("%s is not hidden: %v", p, hidden)
		}
	}
}

// writeUnit lays out a systemd directory with a unit, a drop-in and an
// EnvironmentFile holding the model key.
func writeUnit(t *testing.T) (dir, envFile, dropIn string) {
	t.Helper()
	dir = t.TempDir()
	envFile = filepath.Join(dir, "thinbot.env")
	os.WriteFile(envFile, []byte("# the model key\nAGENT_API_KEY=sk-from-env-file\nGOMEMLIMIT=512MiB\n"), 0o600)
	os.WriteFile(filepath.Join(dir, "thinbot.service"), []byte("[Service]\nEnvironmentFile=-"+envFile+"\nExecStart=/usr/bin/thinbot serve\n"), 0o644)
	os.Mkdir(filepath.Join(dir, "thinbot.service.d"), 0o755)
	dropIn = filepath.Join(dir, "thinbot.service.d", "override.conf")
	os.WriteFile(dropIn, []byte("[Service]\nEnvironment=\"MM_TOKEN=abc\" GOGC=200\n"), 0o600)
	return dir, envFile, dropIn
}

func TestSystemdSourcesAreHiddenAndNamed(t *testing.T) {
	dir, envFile, dropIn := writeUnit(t)
	s := discoverSystemd("thinbot.service", []string{dir, filepath.Join(dir, "missing")})
	hide := s.hide()
	for _, want := range []string{filepath.Join(dir, "thinbot.service"), filepath.Join(dir, "thinbot.service.d"), dropIn, envFile} {
		if !slices.Contains(hide, want) {
			t.Errorf("%s is not hidden: %v", want, hide)
		}
	}
	if s.Vars["AGENT_API_KEY"] != envFile || s.Vars["MM_TOKEN"] != dropIn || s.Vars["GOGC"] != "" || s.Vars["GOMEMLIMIT"] != "" {
		t.Errorf("vars = %v", s.Vars)
	}
	c := daemonConfig{StateDir: "/var/lib/thinbot", systemd: s}
	if hidden := c.protectedPaths("/etc/thinbot/thinbot.yaml"); !slices.Contains(hidden, envFile) || !slices.Contains(hidden, dropIn) {
		t.Errorf("protected paths lack the unit's files: %v", hidden)
	}
	w := strings.Join(c.secretWarnings(func(string) string { return "" }), "\n")
	if !strings.Contains(w, "AGENT_API_KEY comes from the environment: systemd reads it from "+envFile) || !strings.Contains(w, "MM_TOKEN") {
		t.Errorf("warnings:\n%s", w)
	}
	// A key set in the environment but in no file found is warned about too.
	c.systemd = discoverSystemd("thinbot.service", nil)
	w = strings.Join(c.secretWarnings(func(k string) string { return map[string]string{"AGENT_API_KEY": "sk"}[k] }), "\n")
	if !strings.Contains(w, "AGENT_API_KEY comes from the environment, from no file") {
		t.Errorf("warnings:\n%s", w)
	}
	c.Model.APIKeyFile = "/etc/thinbot/model.key"
	if w := c.secretWarnings(func(k string) string { return "sk" }); len(w) != 0 {
		t.Errorf("warned although the key comes from a file: %v", w)
	}
}

func TestSystemdUnitOfTheProcess(t *testing.T) {
	if got := systemdUnit("", func(string) string { return "" }); got != "thinbot.service" {
		t.Errorf("default unit %q", got)
	}
	if got := systemdUnit("bot.service", func(string) string { return "" }); got != "bot.service" {
		t.Errorf("configured unit %q", got)
	}
	s := discoverSystemd("thinbot@ops.service", []string{t.TempDir()})
	if s.Unit != "thinbot@ops.service" {
		t.Errorf("unit %q", s.Unit)
	}
}

// TestSecretModeRule: the package's layout (root:thinbot 0640, the daemon
// in group thinbot) passes; other readers are refused.
func TestSecretModeRule(t *testing.T) {
	const daemon, group = 998, 997
	for _, tc := range []struct {
		name       string
		mode       os.FileMode
		uid, gid   uint32
		daemonUID  int
		daemonGIDs []int
		ok         bool
	}{
		{"package layout root:thinbot 0640", 0o640, 0, group, daemon, []int{group}, true},
		{"owned by the daemon 0600", 0o600, daemon, group, daemon, []int{group}, true},
		{"root 0600, root daemon", 0o600, 0, 0, 0, []int{0}, true},
		{"root:root 0640, root daemon", 0o640, 0, 0, 0, []int{0}, true},
		{"readable by others", 0o644, 0, group, daemon, []int{group}, false},
		{"writable by others", 0o602, daemon, group, daemon, []int{group}, false},
		{"group the daemon is not in", 0o640, 0, 1234, daemon, []int{group}, false},
		{"root:thinbot 0640, root daemon not in thinbot", 0o640, 0, group, 0, []int{0}, false},
		{"owned by another user", 0o600, 1001, group, daemon, []int{group}, false},
		{"root:root 0600, the daemon cannot read it", 0o600, 0, 0, daemon, []int{group}, false},
		{"root:thinbot 0600, the daemon cannot read it", 0o600, 0, group, daemon, []int{group}, false},
	} {
		why := secretModeProblem("/etc/thinbot/token", tc.mode, tc.uid, tc.gid, tc.daemonUID, tc.daemonGIDs)
		if (why == "") != tc.ok {
			t.Errorf("%s: problem %q, want ok=%v", tc.name, why, tc.ok)
		}
	}
}

// TestConfigCheckAcceptsGroupReadableToken: a real file, root-owned (or
// ours) 0640 with our group, passes config check.
func TestConfigCheckAcceptsGroupReadableToken(t *testing.T) {
	dir := t.TempDir()
	tok := filepath.Join(dir, "tok")
	os.WriteFile(tok, []byte("secret"), 0o640)
	if err := os.Chown(tok, -1, os.Getegid()); err != nil {
		t.Fatal(err)
	}
	if err := checkSecretFile(tok); err != nil {
		t.Errorf("0640 with the daemon's group refused: %v", err)
	}
	os.Chmod(tok, 0o644)
	if err := checkSecretFile(tok); err == nil {
		t.Error("0644 accepted")
	}
}

func TestConfigCheckRefusesWorkspaceInStateDir(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	ws := filepath.Join(state, "ws")
	os.MkdirAll(ws, 0o700)
	token := filepath.Join(dir, "token")
	os.WriteFile(token, []byte("secret"), 0o600)
	cfg := filepath.Join(dir, "c.yaml")
	os.WriteFile(cfg, []byte(`
model: {base_url: "http://127.0.0.1:9/v1", model: m}
platform: mattermost
mattermost: {url: "https://mm.example.com", token_file: "`+token+`", callback_url: "http://127.0.0.1:8065/hooks/mm"}
state_dir: `+state+`
listen: `+freeAddr(t)+`
channels:
  - {id: "*", workspace: "`+ws+`", approvers: [k9xq3bobbobbobbobbobbobbob]}
`), 0o600)
	var out bytes.Buffer
	e := &env{stdout: &out, stderr: &out, getenv: func(string) string { return "" }}
	err := run(t.Context(), e, []string{"config", "check", "--config", cfg})
	if err == nil || !strings.Contains(out.String(), "channels[0].workspace "+ws+" is inside "+state+", which the sandbox hides") {
		t.Fatalf("config check: %v\n%s", err, out.String())
	}
	// serve refuses it at start, with the same reason.
	out.Reset()
	err = run(t.Context(), e, []string{"serve", "--config", cfg})
	if err == nil || !strings.Contains(err.Error(), "which the sandbox hides") {
		t.Fatalf("serve started: %v", err)
	}
	// So does a terminal run whose directory is inside its state dir.
	if why := workspaceProblem(filepath.Join(dir, ".thinbot", "x"), []string{filepath.Join(dir, ".thinbot")}); why == "" {
		t.Error("a workspace inside the state dir passed")
	}
	if why := workspaceProblem(dir, []string{filepath.Join(dir, ".thinbot"), token}); why != "" {
		t.Errorf("a workspace holding the state dir refused: %s", why)
	}
}

// TestFirstAskHidesTheStateDir: the first `thinbot ask` in a directory
// creates the state dir before the sandbox starts, so an approved command
// (run with -a, past the gate) sees it empty.
func TestFirstAskHidesTheStateDir(t *testing.T) {
	work := t.TempDir()
	m := fakemodel.Start(t,
		toolCall("run", map[string]string{"command": "ls -A " + filepath.Join(work, ".thinbot") + "; echo end", "reason": "look"}),
		fakemodel.Reply{Content: "done"},
	)
	e, _, errb := skillsEnv(map[string]string{"AGENT_BASE_URL": m.URL, "AGENT_MODEL": "test-model"})
	if err := run(t.Context(), e, []string{"ask", "-a", "-C", work, "look"}); err != nil {
		t.Fatalf("ask: %v\n%s", err, errb)
	}
	out := lastTool(m.Requests()[1])
	if !strings.Contains(out, "end") || strings.Contains(out, "events.db") || strings.Contains(out, "audit.jsonl") {
		t.Errorf("the command saw the state dir:\n%s", out)
	}
}

// TestTokensFileIsProtected: with a web section, `cat` of the login tokens
// file is no longer a read-only command (field report B1): the gate asks.
func TestTokensFileIsProtected(t *testing.T) {
	c := daemonConfig{StateDir: "/var/lib/thinbot"}
	c.Web.TokensFile = "/etc/thinbot/web-tokens"
	p, err := loadPolicy("")
	if err != nil {
		t.Fatal(err)
	}
	p = p.WithProtected(c.protectedPaths("/etc/thinbot/thinbot.yaml")...)
	for _, cmd := range []string{"cat /etc/thinbot/web-tokens", "cd /etc/thinbot && cat web-tokens", "grep alice /etc/thinbot/web-tokens"} {
		if d := p.Classify(cmd); d.Verdict.String() == "pass" {
			t.Errorf("Classify(%q) = %v (%s), want it protected", cmd, d.Verdict, d.Rule)
		}
	}
}

// TestConfigCheckAsRootChecksForTheUnitsUser: config check run as root
// judges the secret files for the daemon's user from the unit's User=
// and Group=, so the package's layout passes there too, and a file only
// root can read is refused (the daemon could not read it).
func TestConfigCheckAsRootChecksForTheUnitsUser(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") != "" {
			t.Fatal("CI runs the tests as root; this one needs it (config check under sudo)")
		}
		t.Skip("needs root, as config check under sudo")
	}
	s := systemdSources{User: "nobody", Group: "nogroup"}
	who := s.daemonUser()
	if who.uid == 0 || len(who.gids) == 0 {
		t.Fatalf("daemon user %+v", who)
	}
	dir := t.TempDir()
	tok := filepath.Join(dir, "tok")
	os.WriteFile(tok, []byte("secret"), 0o640)
	os.Chown(tok, 0, who.gids[len(who.gids)-1])
	if err := checkSecretFileAs(tok, who); err != nil {
		t.Errorf("root:<daemon group> 0640 refused: %v", err)
	}
	os.Chown(tok, 0, 0)
	os.Chmod(tok, 0o600)
	if err := checkSecretFileAs(tok, who); err == nil || !strings.Contains(err.Error(), "cannot be read by the daemon's user") {
		t.Errorf("root:root 0600 for a daemon running as nobody: %v", err)
	}
}

// FuzzSystemdUnit: whatever a unit file or an EnvironmentFile holds, the
// parser records only absolute EnvironmentFile paths without specifiers,
// and only secret variables, each with the file that set it.
func FuzzSystemdUnit(f *testing.F) {
	f.Add("[Service]\nEnvironmentFile=-/etc/thinbot/env\nEnvironment=\"MM_TOKEN=x\" A=b\nUser=thinbot\n", "AGENT_API_KEY=sk\nexport DB_PASSWORD=p\n")
	f.Add("EnvironmentFile=%h/env\nEnvironmentFile=relative\nEnvironment=\n", "=\n==\nexport \n")
	f.Add("", "")
	f.Fuzz(func(t *testing.T, unit, envFile string) {
		s := systemdSources{Vars: map[string]string{}}
		s.parseUnit(strings.NewReader(unit), "/u")
		s.parseEnvFile(strings.NewReader(envFile), "/e")
		for _, p := range s.EnvFiles {
			if !filepath.IsAbs(p) || strings.Contains(p, "%") || strings.HasPrefix(p, "-") {
				t.Errorf("EnvironmentFile %q recorded", p)
			}
		}
		for name, file := range s.Vars {
			if !secretVar(name) || (file != "/u" && file != "/e") {
				t.Errorf("variable %q from %q recorded", name, file)
			}
		}
	})
}

// TestTokensFileReadsEmptyInTheSandbox: the kernel sandbox started with the
// derived set shows the login tokens file empty to a command of either
// tier (field report B1: `cat` printed every token).
func TestTokensFileReadsEmptyInTheSandbox(t *testing.T) {
	dir := t.TempDir()
	tokens := filepath.Join(dir, "etc", "web-tokens")
	os.MkdirAll(filepath.Dir(tokens), 0o700)
	os.WriteFile(tokens, []byte("alice alice-token-0123456789\n"), 0o600)
	ws := filepath.Join(dir, "ws")
	os.Mkdir(ws, 0o755)
	c := daemonConfig{StateDir: filepath.Join(dir, "state")}
	c.Web.TokensFile = tokens
	sbx := startSandbox(t.Context(), "on", c.protectedPaths(filepath.Join(dir, "etc", "thinbot.yaml")), []string{ws}, slog.New(slog.DiscardHandler))
	defer sbx.close()
	if sbx.sb == nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("the sandbox did not start: %s", sbx.noSandbox)
		}
		t.Skipf("the sandbox did not start: %s", sbx.noSandbox)
	}
	for _, m := range []sandbox.Mode{sandbox.ReadOnly, sandbox.Approved} {
		var out strings.Builder
		res, err := sbx.sb.Run(t.Context(), m, sandbox.Cmd{Args: []string{"/bin/cat", tokens}, Dir: ws, Env: []string{"PATH=/usr/bin:/bin"}}, &out)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(out.String(), "alice-token") {
			t.Errorf("%s: cat printed the tokens (exit %d): %q", m, res.ExitCode, out.String())
		}
	}
}

// TestSecretValuesAreTheTokens: the values redacted from output are the
// secrets of the secret files, not the user names beside them.
func TestSecretValuesAreTheTokens(t *testing.T) {
	dir := t.TempDir()
	tokens := filepath.Join(dir, "web-tokens")
	os.WriteFile(tokens, []byte("# users\nsecurity@example.com alice-token-0123456789\n"), 0o600)
	env := filepath.Join(dir, "env")
	os.WriteFile(env, []byte("AGENT_API_KEY=\"sk-0123456789abcdef\"\n"), 0o600)
	c := daemonConfig{SecretFiles: []string{env}}
	c.Web.TokensFile = tokens
	got := c.secretValues()
	for _, want := range []string{"alice-token-0123456789", "sk-0123456789abcdef"} {
		if !slices.Contains(got, want) {
			t.Errorf("secret values %q lack %q", got, want)
		}
	}
	for _, v := range got {
		if v == "security@example.com" {
			t.Errorf("a user name is redacted: %q", got)
		}
	}
}
