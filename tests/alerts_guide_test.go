package tests

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/thinbot/thinbot/tests/fakemodel"
)

// deploy/alerts.md followed against a real Alertmanager and the Mattermost
// fake: its token block makes the token, its thinbot block is the config's
// alerts section, its Alertmanager block (checked by amtool) is
// Alertmanager's config, its curl block is run as written, and its Grafana
// block names the same URL and token. Rewritten are only what a reader
// replaces (the root of the filesystem, thinbot's address, the channel)
// and Alertmanager's group_wait and group_interval, so that the test does
// not wait 10 s and a minute.
func TestGuideAlerts(t *testing.T) {
	needTool(t, "prometheus-alertmanager")
	needTool(t, "amtool")
	needTool(t, "curl")
	needTool(t, "openssl")
	text, err := os.ReadFile("../deploy/alerts.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := markedBlocks(string(text))
	for _, want := range []string{"token", "thinbot", "alertmanager", "grafana", "try"} {
		if blocks[want] == "" {
			t.Fatalf("deploy/alerts.md has no %q block", want)
		}
	}
	root := t.TempDir()
	local := func(s string) string { return strings.ReplaceAll(s, "/etc/thinbot", root+"/etc/thinbot") }
	sh := func(script string) string {
		out, err := exec.Command("bash", "-euo", "pipefail", "-c", script).CombinedOutput()
		if err != nil {
			t.Fatalf("%s\n%s: %v", script, out, err)
		}
		return string(out)
	}
	sh(local(blocks["token"]))
	token := filepath.Join(root, "etc/thinbot/alerts.token")
	st, err := os.Stat(token)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("token file: %v %v", st, err)
	}

	chat := newMMChat(t)
	m := fakemodel.Start(t, fakemodel.Reply{Content: "Findings: the database is up again."})
	section := strings.ReplaceAll(local(blocks["thinbot"]), "channel: ops", "channel: "+chat.Ops())
	r := newRig(t, chat, m.URL, rigOpts{Extra: section})
	ops := chat.Ops()
	here := func(s string) string { return strings.ReplaceAll(local(s), "127.0.0.1:8079", r.addr) }

	amCfg := here(blocks["alertmanager"])
	cfgFile := filepath.Join(root, "alertmanager.yml")
	os.WriteFile(cfgFile, []byte(amCfg), 0o600)
	if out, err := exec.Command("amtool", "check-config", cfgFile).CombinedOutput(); err != nil {
		t.Fatalf("amtool check-config: %v\n%s", err, out)
	}
	amCfg = regexp.MustCompile(`(group_wait|group_interval): \S+`).ReplaceAllString(amCfg, "$1: 1s")
	am := startAlertmanagerWith(t, amCfg)
	am.post(t, amAlert{Labels: map[string]string{"alertname": "DBDown", "cluster": "eu1", "team": "db", "severity": "critical"},
		Annotations: map[string]string{"summary": "postgres is down"}})
	var card chatPost
	r.waitFor("the DBDown card", func() bool {
		for _, p := range botRoots(chat, ops) {
			if strings.Contains(p.Text, "DBDown") {
				card = p
				return true
			}
		}
		return false
	})
	r.waitPost(ops, card.ID, "Findings: the database is up again.")

	try := here(blocks["try"])
	if out := sh(try); !strings.Contains(out, "opened a thread") {
		t.Errorf("the guide's curl: %s", out)
	}
	if out := sh(try); !strings.Contains(out, "duplicate delivery") {
		t.Errorf("the guide's curl again: %s", out)
	}
	r.waitFor("the GuideTest card", func() bool {
		for _, p := range botRoots(chat, ops) {
			if strings.Contains(p.Text, "GuideTest") {
				return true
			}
		}
		return false
	})

	var g struct {
		ContactPoints []struct {
			Receivers []struct {
				Type     string            `yaml:"type"`
				Settings map[string]string `yaml:"settings"`
			} `yaml:"receivers"`
		} `yaml:"contactPoints"`
	}
	if err := yaml.Unmarshal([]byte(blocks["grafana"]), &g); err != nil || len(g.ContactPoints) != 1 || len(g.ContactPoints[0].Receivers) != 1 {
		t.Fatalf("grafana block: %v %+v", err, g)
	}
	s := g.ContactPoints[0].Receivers[0].Settings
	if g.ContactPoints[0].Receivers[0].Type != "webhook" || s["url"] != "http://127.0.0.1:8079/alerts" || s["authorization_scheme"] != "Bearer" ||
		s["authorization_credentials"] != "$__file{/etc/thinbot/alerts.token}" {
		t.Errorf("grafana block settings: %v", s)
	}
	r.stop()
}

// markedBlocks returns a guide's fenced blocks marked <!-- guide-test: NAME -->.
func markedBlocks(text string) map[string]string {
	blocks := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(text))
	name, in := "", false
	var b strings.Builder
	for sc.Scan() {
		line := sc.Text()
		switch {
		case !in && strings.HasPrefix(line, "<!-- guide-test: "):
			name = strings.TrimSuffix(strings.TrimPrefix(line, "<!-- guide-test: "), " -->")
		case !in && name != "" && strings.HasPrefix(line, "```"):
			in = true
			b.Reset()
		case in && strings.HasPrefix(line, "```"):
			blocks[name] = b.String()
			name, in = "", false
		case in:
			b.WriteString(line + "\n")
		}
	}
	return blocks
}
