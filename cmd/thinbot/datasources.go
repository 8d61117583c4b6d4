package main

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/thinbot/thinbot/agentcore/datasource"
)

// datasourceConfig is one entry of the datasources: section: a Prometheus,
// Loki or Alertmanager the model's read-only query tools ask
// (deploy/datasources.md). The credentials come from files, which the
// sandbox hides from every command like every secret:"file" key.
type datasourceConfig struct {
	Name string `yaml:"name"`
	// Type is prometheus, loki or alertmanager.
	Type string `yaml:"type"`
	URL  string `yaml:"url"`
	// Username with PasswordFile is basic auth; BearerTokenFile a bearer
	// token; OrgID Loki's tenant (X-Scope-OrgID).
	Username        string `yaml:"username"`
	PasswordFile    string `yaml:"password_file" secret:"file"`
	BearerTokenFile string `yaml:"bearer_token_file" secret:"file"`
	OrgID           string `yaml:"org_id"`
	TLS             struct {
		CAFile             string `yaml:"ca_file" secret:"no"`
		CertFile           string `yaml:"cert_file" secret:"no"`
		KeyFile            string `yaml:"key_file" secret:"file"`
		ServerName         string `yaml:"server_name"`
		InsecureSkipVerify bool   `yaml:"insecure_skip_verify"`
	} `yaml:"tls"`
	// Timeout bounds one query (default 30s); MaxBytes one answer
	// (default 16 MiB).
	Timeout  duration `yaml:"timeout"`
	MaxBytes int64    `yaml:"max_bytes"`
}

// resolveDatasourcePaths makes the section's file paths absolute against
// base, as resolvePaths does for the rest.
func (c *daemonConfig) resolveDatasourcePaths(base string) {
	for i := range c.Datasources {
		ds := &c.Datasources[i]
		for _, p := range []*string{&ds.PasswordFile, &ds.BearerTokenFile, &ds.TLS.CAFile, &ds.TLS.CertFile, &ds.TLS.KeyFile} {
			*p = rel(base, *p)
		}
	}
}

// checkDatasources checks the datasources section without contacting
// any of them: names, types, URLs, the credentials files (as the daemon's
// user reads them) and the TLS files.
func (c *daemonConfig) checkDatasources(bad func(string, ...any), who daemonUser) {
	var names []string
	for i, ds := range c.Datasources {
		where := fmt.Sprintf("datasources[%d]", i)
		if ds.Name != "" {
			where = fmt.Sprintf("datasources[%d] (%s)", i, ds.Name)
		}
		if slices.Contains(names, ds.Name) {
			bad("%s: the name %q is taken by an earlier datasource", where, ds.Name)
		}
		names = append(names, ds.Name)
		ds.Timeout.check(bad, where+".timeout", "30s")
		if ds.MaxBytes < 0 {
			bad("%s.max_bytes is negative", where)
		}
		if ds.PasswordFile != "" && ds.Username == "" {
			bad("%s: password_file without username", where)
		}
		if ds.PasswordFile != "" && ds.BearerTokenFile != "" {
			bad("%s: give password_file or bearer_token_file, not both", where)
		}
		if ds.OrgID != "" && ds.Type != datasource.Loki {
			bad("%s: org_id is Loki's tenant; this is %s", where, ds.Type)
		}
		for key, f := range map[string]string{"password_file": ds.PasswordFile, "bearer_token_file": ds.BearerTokenFile, "tls.key_file": ds.TLS.KeyFile} {
			if f == "" {
				continue
			}
			if err := checkSecretFileAs(f, who); err != nil {
				bad("%s.%s: %v", where, key, err)
			}
		}
		if _, err := datasource.New(ds.config("", "")); err != nil {
			bad("%s: %v", where, strings.TrimPrefix(err.Error(), "datasource "+ds.Name+": "))
		}
	}
}

// config is the entry as a datasource.Config, with the secrets read.
func (ds *datasourceConfig) config(password, token string) datasource.Config {
	return datasource.Config{Name: ds.Name, Kind: ds.Type, URL: ds.URL, Username: ds.Username, Password: password, BearerToken: token,
		OrgID: ds.OrgID, CAFile: ds.TLS.CAFile, CertFile: ds.TLS.CertFile, KeyFile: ds.TLS.KeyFile, ServerName: ds.TLS.ServerName,
		InsecureSkipVerify: ds.TLS.InsecureSkipVerify, Timeout: ds.Timeout.Duration, MaxBytes: ds.MaxBytes}
}

// datasources builds the configured sources, reading their credentials.
func (c *daemonConfig) datasources() ([]*datasource.Source, error) {
	var out []*datasource.Source
	for _, ds := range c.Datasources {
		var password, token string
		var err error
		if ds.PasswordFile != "" {
			if password, err = readSecret(ds.PasswordFile); err != nil {
				return nil, fmt.Errorf("datasource %s: password_file: %w", ds.Name, err)
			}
		}
		if ds.BearerTokenFile != "" {
			if token, err = readSecret(ds.BearerTokenFile); err != nil {
				return nil, fmt.Errorf("datasource %s: bearer_token_file: %w", ds.Name, err)
			}
		}
		s, err := datasource.New(ds.config(password, token))
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// newSecretFiles are the secret files of the datasources section of c that
// the running daemon's sandbox does not hide (it hides those it started
// with, from old): a reload naming one needs a restart, or a command
// could read it.
func newSecretFiles(old, c *daemonConfig, configPath string) []string {
	hidden := old.protectedPaths(configPath)
	var out []string
	for _, kv := range c.secretFiles() {
		if !strings.HasPrefix(kv[0], "datasources") {
			continue
		}
		if a, _ := filepath.Abs(kv[1]); !slices.Contains(hidden, a) {
			out = append(out, kv[0]+" ("+kv[1]+": a secret file the sandbox was not started with)")
		}
	}
	return out
}
