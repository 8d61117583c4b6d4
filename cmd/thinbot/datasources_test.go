package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestConfigCheckDatasources: config check names each problem of the
// datasources section without contacting a source, and passes a good one.
func TestConfigCheckDatasources(t *testing.T) {
	channels := `  - {id: "*", workspace: "WS", approvers: [k9xq3bobbobbobbobbobbobbob]}
datasources:
  - {name: prom, type: prometheus, url: "http://127.0.0.1:9"}
  - {name: logs, type: loki, url: "https://loki.example.com", username: u, password_file: "WS/pw", org_id: ops}
`
	dir := t.TempDir()
	out, err := checkConfig(t, strings.ReplaceAll(channels, "WS/pw", writeFile(t, dir, "pw", "hunter2hunter2", 0o600)))
	if err != nil {
		t.Fatalf("config check: %v\n%s", err, out)
	}
	out, err = checkConfig(t, `  - {id: "*", workspace: "WS", approvers: [k9xq3bobbobbobbobbobbobbob]}
datasources:
  - {name: prom, type: prometheus, url: "http://127.0.0.1:9"}
  - {name: prom, type: graphite, url: "ftp://x"}
  - {name: am, type: alertmanager, url: "http://u:p@am:9093", org_id: x, timeout: soon}
  - {name: l, type: loki, url: "http://l", password_file: "`+writeFile(t, dir, "open", "secretsecret", 0o644)+`"}
  - {name: t, type: loki, url: "https://l", tls: {cert_file: /c.pem}}
`)
	if err == nil {
		t.Fatal("config check passed a broken datasources section")
	}
	for _, want := range []string{
		`datasources[1] (prom): the name "prom" is taken`,
		`kind "graphite" is not prometheus, loki or alertmanager`,
		`datasources[2] (am): url has credentials in it`,
		`datasources[2] (am): org_id is Loki's tenant`,
		`datasources[2] (am).timeout "soon"`,
		`datasources[3] (l): password_file without username`,
		`datasources[3] (l).password_file: `,
		`datasources[4] (t): cert_file and key_file go together`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("config check output lacks %q:\n%s", want, out)
		}
	}
}

func writeFile(t *testing.T, dir, name, text string, mode os.FileMode) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(text), mode); err != nil {
		t.Fatal(err)
	}
	os.Chmod(p, mode)
	return p
}

// TestDatasourceSecretsHiddenAndReload: a datasource's credentials files
// are among the paths the sandbox hides and the gate protects; a reload
// that names one the daemon did not start with needs a restart, and one
// that keeps them does not.
func TestDatasourceSecretsHiddenAndReload(t *testing.T) {
	old := &daemonConfig{StateDir: "/var/lib/thinbot", Datasources: []datasourceConfig{
		{Name: "l", Type: "loki", URL: "http://l", Username: "u", PasswordFile: "/etc/thinbot/loki.pw"}}}
	old.Datasources[0].TLS.KeyFile = "/etc/thinbot/client.key"
	hidden := old.protectedPaths("/etc/thinbot/thinbot.yaml")
	for _, p := range []string{"/etc/thinbot/loki.pw", "/etc/thinbot/client.key"} {
		if !slices.Contains(hidden, p) {
			t.Errorf("%s is not hidden: %v", p, hidden)
		}
	}
	same := *old
	same.Datasources = append([]datasourceConfig{{Name: "p", Type: "prometheus", URL: "http://p"}}, old.Datasources...)
	if got := newSecretFiles(old, &same, "/etc/thinbot/thinbot.yaml"); len(got) != 0 {
		t.Errorf("a reload adding a source without new secrets needs a restart: %q", got)
	}
	more := same
	more.Datasources = append(slices.Clone(same.Datasources), datasourceConfig{Name: "a", Type: "alertmanager", URL: "http://a", BearerTokenFile: "/etc/thinbot/am.token"})
	if got := newSecretFiles(old, &more, "/etc/thinbot/thinbot.yaml"); len(got) != 1 || !strings.Contains(got[0], "datasources[2].bearer_token_file") {
		t.Errorf("a reload naming a new secret file: %q; want it refused", got)
	}
}

// TestDatasourcesGuideConfig: the config block of deploy/datasources.md
// decodes with every key known, and config check finds in it only what a
// reader's machine lacks (the credentials and CA files).
func TestDatasourcesGuideConfig(t *testing.T) {
	guide, err := os.ReadFile("../../deploy/datasources.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, _ := strings.Cut(string(guide), "```yaml\n")
	block, _, ok := strings.Cut(rest, "```")
	if !ok {
		t.Fatal("the guide has no yaml block")
	}
	var c daemonConfig
	dec := yaml.NewDecoder(strings.NewReader(block))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil {
		t.Fatalf("the guide's config: %v", err)
	}
	if len(c.Datasources) != 3 || c.Datasources[0].Type != "prometheus" || c.Datasources[1].PasswordFile == "" || c.Datasources[2].BearerTokenFile == "" {
		t.Errorf("decoded %+v", c.Datasources)
	}
	var problems []string
	c.checkDatasources(func(f string, a ...any) { problems = append(problems, fmt.Sprintf(f, a...)) }, currentUser())
	for _, p := range problems {
		if !strings.Contains(p, "no such file or directory") {
			t.Errorf("config check: %s", p)
		}
	}
}
