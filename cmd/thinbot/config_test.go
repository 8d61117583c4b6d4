package main

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// The example config documents every key; it must decode into the real
// struct with no unknown field.
func TestExampleConfigKeysAreKnown(t *testing.T) {
	data, err := os.ReadFile("../../deploy/thinbot.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var c daemonConfig
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil {
		t.Fatalf("example config: %v", err)
	}
	if c.Platform != "mattermost" || len(c.Channels) != 2 || !c.Channels[0].TwoPerson || c.Channels[1].Name != "sandbox" {
		t.Errorf("decoded %+v", c)
	}
}

func TestConfigCheckReportsEveryProblem(t *testing.T) {
	dir := t.TempDir()
	token := filepath.Join(dir, "token")
	os.WriteFile(token, []byte("secret"), 0o644) // readable by others: refused
	cfg := filepath.Join(dir, "c.yaml")
	os.WriteFile(cfg, []byte(`
platform: mattermost
mattermost:
  url: https://mm.example.com
  token_file: `+token+`
listen: nonsense
approval_timeout: soon
channels:
  - id: abc
    workspace: /does/not/exist
`), 0o600)
	var out bytes.Buffer
	e := &env{stdout: &out, stderr: &out, getenv: func(string) string { return "" }}
	err := run(t.Context(), e, []string{"config", "check", "--config", cfg})
	if err == nil {
		t.Fatal("config check passed a broken config")
	}
	for _, want := range []string{"model.base_url", "model.model", "readable or writable by other users", "callback_url",
		"listen", "state_dir", "approval_timeout", "is not a directory", "no approvers"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("config check output lacks %q:\n%s", want, out.String())
		}
	}
}

// checkConfig writes a Mattermost config whose channels section is
// channels (with WS standing for a real workspace folder) and runs
// `thinbot config check` on it.
func checkConfig(t *testing.T, channels string) (string, error) {
	t.Helper()
	dir := t.TempDir()
	token := filepath.Join(dir, "token")
	os.WriteFile(token, []byte("secret"), 0o600)
	cfg := filepath.Join(dir, "c.yaml")
	os.WriteFile(cfg, []byte(`
model: {base_url: "http://127.0.0.1:9/v1", model: m}
platform: mattermost
mattermost: {url: "https://mm.example.com", token_file: "`+token+`", callback_url: "http://127.0.0.1:8065/hooks/mm"}
state_dir: `+filepath.Join(dir, "state")+`
listen: `+freeAddr(t)+`
channels:
`+strings.ReplaceAll(channels, "WS", dir)), 0o600)
	var out bytes.Buffer
	e := &env{stdout: &out, stderr: &out, getenv: func(string) string { return "" }}
	err := run(t.Context(), e, []string{"config", "check", "--config", cfg})
	return out.String(), err
}

func TestConfigCheckAcceptsAGoodConfig(t *testing.T) {
	if out, err := checkConfig(t, `  - {id: "*", workspace: "WS", approvers: [k9xq3bobbobbobbobbobbobbob]}`+"\n"); err != nil {
		t.Fatalf("config check: %v\n%s", err, out)
	}
}

func TestConfigChannelsByIDOrName(t *testing.T) {
	out, err := checkConfig(t, `  - {name: "ops", workspace: "WS", approvers: [k9xq3bobbobbobbobbobbobbob]}
  - {name: "#ops", workspace: "WS", approvers: [k9xq3bobbobbobbobbobbobbob]}
  - {id: "abc", name: "x", workspace: "WS", approvers: [k9xq3bobbobbobbobbobbobbob]}
  - {workspace: "WS", approvers: [k9xq3bobbobbobbobbobbobbob]}
`)
	if err == nil {
		t.Fatal("config check passed")
	}
	for _, want := range []string{"channels[1] (ops) is listed twice", "channels[2] has both id and name", "channels[3] has neither id nor name"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// freeAddr returns a 127.0.0.1 address that was free a moment ago, so that
// config check's trial bind does not depend on the default port.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// writeCheckConfig writes body as a config file next to a good token and
// workspace (TOKEN and WS in body stand for them) and runs config check.
func writeCheckConfig(t *testing.T, body string) (string, error) {
	t.Helper()
	dir := t.TempDir()
	token := filepath.Join(dir, "token")
	os.WriteFile(token, []byte("secret"), 0o600)
	cfg := filepath.Join(dir, "c.yaml")
	body = strings.NewReplacer("TOKEN", token, "WS", dir, "STATE", filepath.Join(dir, "state")).Replace(body)
	os.WriteFile(cfg, []byte(body), 0o600)
	var out bytes.Buffer
	e := &env{stdout: &out, stderr: &out, getenv: func(string) string { return "" }}
	err := run(t.Context(), e, []string{"config", "check", "--config", cfg})
	return out.String(), err
}

// Unknown keys are named with their section and the keys it knows, never
// with a dump of the Go struct they failed to fit.
func TestConfigCheckUnknownKeys(t *testing.T) {
	out, err := writeCheckConfig(t, `
model: {base_url: "http://127.0.0.1:9/v1", model: m, temprature: 0.2}
platform: slack
slack:
  bot_token: xoxb-oops
  bot_token_file: TOKEN
  app_token_file: TOKEN
state_dir: STATE
chanels: []
channels:
  - {id: C1, workspace: WS, approvers: [U012AB3CDE], approver: [U2]}
`)
	if err == nil {
		t.Fatal("config check passed unknown keys")
	}
	for _, want := range []string{
		`line 5: unknown key "bot_token" in slack (known: api_url, app_token_file, bot_token_file, mode, signing_secret_file)`,
		`unknown key "temprature" in model (known: api_key_file, base_url,`,
		`line 9: unknown key "chanels" at the top level (known: alerts, allow_bots, approval_reminders, approval_timeout,`,
		`unknown key "approver" in channels[0] (known: allow_all, any_member_approves, approvers,`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "struct {") || strings.Contains(out, `yaml:\"`) {
		t.Errorf("output shows Go types:\n%s", out)
	}
}

// A token path that is a directory or an empty file cannot hold a token:
// config check says so instead of serve failing later (or sending "").
func TestConfigCheckSecretFileDirectoryOrEmpty(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	os.WriteFile(empty, []byte(" \n"), 0o600)
	sub := filepath.Join(dir, "tokens")
	os.Mkdir(sub, 0o700)
	out, err := writeCheckConfig(t, `
model: {base_url: "http://127.0.0.1:9/v1", model: m, api_key_file: `+empty+`}
platform: slack
slack: {bot_token_file: `+sub+`, app_token_file: `+empty+`}
state_dir: STATE
channels:
  - {id: C1, workspace: WS, approvers: [U012AB3CDE]}
`)
	if err == nil {
		t.Fatal("config check passed")
	}
	for _, want := range []string{
		"slack.bot_token_file: " + sub + " is a directory",
		"slack.app_token_file: " + empty + " is empty",
		"model.api_key_file: " + empty + " is empty",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// config check tries the bind, so a port already taken (Mattermost's own
// 8065 on the Mattermost host) is found before serve fails on it.
func TestConfigCheckListenInUse(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	out, err := writeCheckConfig(t, `
model: {base_url: "http://127.0.0.1:9/v1", model: m}
platform: slack
slack: {bot_token_file: TOKEN, app_token_file: TOKEN}
state_dir: STATE
listen: `+l.Addr().String()+`
channels:
  - {id: C1, workspace: WS, approvers: [U012AB3CDE]}
`)
	if err == nil {
		t.Fatal("config check passed a listen address in use")
	}
	if want := "listen " + l.Addr().String() + ": address already in use"; !strings.Contains(out, want) {
		t.Errorf("output lacks %q:\n%s", want, out)
	}
}

// A port held by a running thinbot (config check run beside its daemon) is
// a note, not a problem.
func TestConfigCheckListenHeldByThinbot(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/healthz":
			fmt.Fprintln(w, "ok")
		case "/metrics":
			fmt.Fprintln(w, "thinbot_chain_events 42")
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	out, err := writeCheckConfig(t, `
model: {base_url: "http://127.0.0.1:9/v1", model: m}
platform: slack
slack: {bot_token_file: TOKEN, app_token_file: TOKEN}
state_dir: STATE
listen: `+addr+`
channels:
  - {id: C1, workspace: WS, approvers: [U012AB3CDE]}
`)
	if err != nil || !strings.Contains(out, "note: listen "+addr+" is in use by a running thinbot") {
		t.Errorf("config check beside a running thinbot: %v\n%s", err, out)
	}
}

// The default listen address is not Mattermost's port (8065) nor the web
// console's (8080).
func TestConfigDefaultListen(t *testing.T) {
	dir := t.TempDir()
	token := filepath.Join(dir, "token")
	os.WriteFile(token, []byte("secret"), 0o600)
	cfg := filepath.Join(dir, "c.yaml")
	os.WriteFile(cfg, []byte(`
model: {base_url: "http://127.0.0.1:9/v1", model: m}
platform: slack
slack: {bot_token_file: `+token+`, app_token_file: `+token+`}
state_dir: `+filepath.Join(dir, "state")+`
channels:
  - {id: C1, workspace: `+dir+`, approvers: [U012AB3CDE]}
`), 0o600)
	c, err := loadConfig(cfg, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if c.Listen != "127.0.0.1:8079" {
		t.Errorf("default listen = %q, want 127.0.0.1:8079", c.Listen)
	}
}

// Every command's --help prints its usage and succeeds: no "flag: help
// requested" error, exit status 0.
func TestEveryCommandHelpExitsZero(t *testing.T) {
	for _, c := range commands() {
		for _, flag := range []string{"-h", "--help"} {
			var out bytes.Buffer
			e := &env{stdin: strings.NewReader(""), stdout: &out, stderr: &out, getenv: func(string) string { return "" }}
			if err := run(t.Context(), e, []string{c.name, flag}); err != nil {
				t.Errorf("thinbot %s %s: %v\n%s", c.name, flag, err, out.String())
			}
			if strings.Contains(out.String(), "help requested") {
				t.Errorf("thinbot %s %s printed %q", c.name, flag, out.String())
			}
		}
	}
	var out bytes.Buffer
	e := &env{stdout: &out, stderr: &out, getenv: func(string) string { return "" }}
	if err := run(t.Context(), e, []string{"serve", "--help"}); err != nil || !strings.Contains(out.String(), "-config") {
		t.Errorf("serve --help: %v, printed %q", err, out.String())
	}
}

// Approvers (and users) are user ids: a name could be taken by renaming an
// account.
// config check says so for each name, with where to find the id.
func TestConfigApproversAreIDs(t *testing.T) {
	out, err := checkConfig(t, `  - {id: "*", workspace: "WS", approvers: [bob, "@alice", k9xq3bobbobbobbobbobbobbob]}`+"\n")
	if err == nil {
		t.Fatal("config check passed approver names")
	}
	for _, want := range []string{`channels[0].approvers: "bob" is not a Mattermost user id`, `"@alice" is not a Mattermost user id`, "renamed"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "k9xq3bob") {
		t.Errorf("an id was refused:\n%s", out)
	}
	out, err = writeCheckConfig(t, `
model: {base_url: "http://127.0.0.1:9/v1", model: m}
platform: slack
slack: {bot_token_file: TOKEN, app_token_file: TOKEN}
state_dir: STATE
listen: `+freeAddr(t)+`
users: [U012AB3CDE, carol]
channels:
  - {id: C1, workspace: WS, approvers: [U012AB3CDE, W0123ABCD, bob]}
`)
	if err == nil || !strings.Contains(out, `"bob" is not a Slack user id (like U012AB3CDE`) || strings.Contains(out, `"U012AB3CDE"`) || strings.Contains(out, `"W0123ABCD"`) ||
		!strings.Contains(out, `users: "carol" is not a Slack user id`) {
		t.Errorf("slack approvers: %v\n%s", err, out)
	}
}

// The limits section's cgroup knobs reach the sandbox's Limits, and a
// value out of range is refused with the key's name.
func TestConfigCgroupLimits(t *testing.T) {
	dir := t.TempDir()
	token := filepath.Join(dir, "token")
	os.WriteFile(token, []byte("secret"), 0o600)
	write := func(limits string) string {
		cfg := filepath.Join(dir, "c.yaml")
		os.WriteFile(cfg, []byte(`
model: {base_url: "http://127.0.0.1:9/v1", model: m}
platform: slack
slack: {bot_token_file: `+token+`, app_token_file: `+token+`}
state_dir: `+filepath.Join(dir, "state")+`
channels:
  - {id: C1, workspace: `+dir+`, approvers: [U012AB3CDE]}
limits: `+limits+`
`), 0o600)
		return cfg
	}
	c, err := loadConfig(write("{memory_total_mib: 2048, processes_total: 100, cpus: 0.5, cgroup: v1}"), func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	sc := c.sandboxConfig(nil, nil)
	if l := sc.Limits; l.MemoryTotal != 2048<<20 || l.ProcessesTotal != 100 || l.CPUs != 0.5 || sc.Cgroup != "v1" {
		t.Errorf("sandboxConfig = %+v, cgroup %q", l, sc.Cgroup)
	}
	for bad, key := range map[string]string{"{cgroup: v3}": "limits.cgroup", "{cpus: 0.001}": "limits.cpus", "{memory_total_mib: 10}": "limits.memory_total_mib", "{processes_total: 2}": "limits.processes_total"} {
		if _, err := loadConfig(write(bad), func(string) string { return "" }); err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("limits %s: %v, want an error naming %s", bad, err, key)
		}
	}
}

// TestConfigTimezone: timezone and channels[].timezone load IANA names
// (unset is nil: the bot's UTC, as before the keys existed); a name that is
// no zone, or Local, fails the config with the key named.
func TestConfigTimezone(t *testing.T) {
	const base = "model: {base_url: \"http://127.0.0.1:9/v1\", model: m}\nplatform: mattermost\n" +
		"mattermost: {url: \"https://mm.example.com\", token_file: TOKEN, callback_url: \"http://127.0.0.1:8065/hooks/mm\"}\nstate_dir: STATE\n"
	for _, tc := range []struct {
		top, channel string
		want, wantCh string // the loaded zones' names; "" is unset
		err          string
	}{
		{"", "", "", "", ""},
		{"timezone: Europe/Berlin\n", "", "Europe/Berlin", "", ""},
		{"timezone: UTC\n", ", timezone: Asia/Kolkata", "UTC", "Asia/Kolkata", ""},
		{"", ", timezone: America/New_York", "", "America/New_York", ""},
		{"timezone: Europe/Berln\n", "", "", "", `timezone "Europe/Berln": not a time zone name; want an IANA name like Europe/Berlin, America/New_York or UTC`},
		{"timezone: Local\n", "", "", "", `timezone "Local": not a time zone name`},
		{"timezone: ../../etc/passwd\n", "", "", "", `timezone "../../etc/passwd": not a time zone name`},
		{"", ", timezone: CEST", "", "", `channels[0].timezone "CEST": not a time zone name`},
	} {
		dir := t.TempDir()
		token := filepath.Join(dir, "token")
		os.WriteFile(token, []byte("secret"), 0o600)
		p := filepath.Join(dir, "c.yaml")
		body := base + tc.top + "listen: " + freeAddr(t) + "\nchannels:\n  - {id: \"*\", workspace: WS, approvers: [k9xq3bobbobbobbobbobbobbob]" + tc.channel + "}\n"
		os.WriteFile(p, []byte(strings.NewReplacer("TOKEN", token, "WS", dir, "STATE", filepath.Join(dir, "state")).Replace(body)), 0o600)
		c, err := loadConfig(p, func(string) string { return "" })
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q%q: err = %v, want %q", tc.top, tc.channel, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%q%q: %v", tc.top, tc.channel, err)
		}
		name := func(z zone) string {
			if z.loc == nil {
				return ""
			}
			return z.loc.String()
		}
		if got, gotCh := name(c.Timezone), name(c.Channels[0].Timezone); got != tc.want || gotCh != tc.wantCh {
			t.Errorf("%q%q: zones %q, %q; want %q, %q", tc.top, tc.channel, got, gotCh, tc.want, tc.wantCh)
		}
	}
	// config check reports it with the other problems, and passes a good one.
	out, err := writeCheckConfig(t, base+"timezone: Europe/Berlim\nlisten: "+freeAddr(t)+"\nchannels:\n  - {id: \"*\", workspace: WS, approvers: [k9xq3bobbobbobbobbobbobbob], timezone: Mars/Olympus}\n")
	if err == nil || !strings.Contains(out, `problem: timezone "Europe/Berlim": not a time zone name`) || !strings.Contains(out, `problem: channels[0].timezone "Mars/Olympus": not a time zone name`) {
		t.Errorf("config check: %v\n%s", err, out)
	}
	if out, err := writeCheckConfig(t, base+"timezone: Europe/Berlin\nlisten: "+freeAddr(t)+"\nchannels:\n  - {id: \"*\", workspace: WS, approvers: [k9xq3bobbobbobbobbobbobbob], timezone: Asia/Kolkata}\n"); err != nil {
		t.Errorf("config check of a good config: %v\n%s", err, out)
	}
}

// TestConfigCheckOpsItems: a Mattermost URL without a scheme (serve then
// failed with "url ://" and the unit restarted every 5 s) and a log_level
// that is no level are problems; a listen address other hosts reach is a
// warning; relative paths are the config file's directory's, wherever
// config check (or serve, which systemd starts in /) runs.
func TestConfigCheckOpsItems(t *testing.T) {
	out, err := writeCheckConfig(t, `
model: {base_url: "http://127.0.0.1:9/v1", model: m}
platform: mattermost
mattermost: {url: "mm.example.com", token_file: TOKEN, callback_url: "http://127.0.0.1:8065/hooks/mm"}
state_dir: STATE
log_level: verbose
channels:
  - {id: "*", workspace: "WS", approvers: [k9xq3bobbobbobbobbobbobbob]}
`)
	if err == nil {
		t.Fatal("config check passed")
	}
	for _, want := range []string{`mattermost.url "mm.example.com" is not an http(s) URL`, "https://mm.example.com",
		`log_level "verbose": want debug, info, warn or error`} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}

	// Relative paths, checked from another directory.
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "token"), []byte("secret"), 0o600)
	os.Mkdir(filepath.Join(dir, "ws"), 0o755)
	os.WriteFile(filepath.Join(dir, "AGENT.md"), []byte("be brief"), 0o644)
	addr := freeAddr(t)
	_, port, _ := net.SplitHostPort(addr)
	cfg := filepath.Join(dir, "c.yaml")
	os.WriteFile(cfg, []byte(`
model: {base_url: "http://127.0.0.1:9/v1", model: m}
platform: mattermost
mattermost: {url: "https://mm.example.com", token_file: token, callback_url: "http://127.0.0.1:8065/hooks/mm"}
state_dir: state
instructions_file: AGENT.md
listen: 0.0.0.0:`+port+`
log_level: DEBUG
channels:
  - {id: "*", workspace: ws, approvers: [k9xq3bobbobbobbobbobbobbob]}
`), 0o600)
	t.Chdir(t.TempDir())
	var b bytes.Buffer
	e := &env{stdout: &b, stderr: &b, getenv: func(string) string { return "" }}
	if err := run(t.Context(), e, []string{"config", "check", "--config", cfg}); err != nil {
		t.Fatalf("config check of relative paths from another directory: %v\n%s", err, b.String())
	}
	if !strings.Contains(b.String(), "state in "+filepath.Join(dir, "state")) {
		t.Errorf("state_dir not resolved against the config's directory:\n%s", b.String())
	}
	if !strings.Contains(b.String(), "warning: listen 0.0.0.0:"+port+" is reachable from other hosts") {
		t.Errorf("no warning for a listen address other hosts reach:\n%s", b.String())
	}
	c, err := loadConfig(cfg, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if c.Channels[0].Workspace != filepath.Join(dir, "ws") || c.Mattermost.TokenFile != filepath.Join(dir, "token") {
		t.Errorf("serve's config: workspace %q, token_file %q; want them in %s", c.Channels[0].Workspace, c.Mattermost.TokenFile, dir)
	}
	if w := listenWarning("127.0.0.1:8079") + listenWarning("[::1]:8079") + listenWarning("localhost:8079"); w != "" {
		t.Errorf("a loopback listen address warned: %s", w)
	}
}

// TestConfigCheckApprovalReminders: reminders after the expiry, an
// escalation without whom to mention, or mentioning a name instead of an
// id are refused; a good section passes.
func TestConfigCheckApprovalReminders(t *testing.T) {
	ch := `  - {id: "*", workspace: "WS", approvers: [k9xq3bobbobbobbobbobbobbob]}` + "\n"
	out, err := checkConfig(t, ch+`approval_timeout: 10m
approval_reminders: {remind_after: 10m, escalate_after: 5m, escalate_to: [bob]}
`)
	if err == nil {
		t.Fatalf("config check passed bad reminders:\n%s", out)
	}
	for _, want := range []string{"approval_reminders.remind_after 10m0s is not before approval_timeout", "escalate_after 5m0s: want it after remind_after",
		`approval_reminders.escalate_to: "bob" is not a Mattermost user id`} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if out, err := checkConfig(t, ch+"approval_reminders: {escalate_after: 5m}\n"); err == nil || !strings.Contains(out, "escalate_after and escalate_to go together") {
		t.Errorf("an escalation to nobody: %v\n%s", err, out)
	}
	if out, err := checkConfig(t, ch+"approval_reminders: {remind_after: 5m, escalate_after: 10m, escalate_to: [k9xq3carolcarolcarolcarol1]}\n"); err != nil {
		t.Errorf("good reminders refused: %v\n%s", err, out)
	}
}
