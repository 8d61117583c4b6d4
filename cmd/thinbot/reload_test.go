package main

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// TestServeReloadRefusals: POST /-/reload is off (403) without
// reload_token_file, and answers 401 with a WWW-Authenticate challenge to
// a request without one of its tokens; neither gets near a reload (the
// daemon here has none to run).
func TestServeReloadRefusals(t *testing.T) {
	d := &daemon{logger: slog.New(slog.DiscardHandler)}
	d.reload.c = &daemonConfig{}
	post := func(auth string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, "/-/reload", nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		w := httptest.NewRecorder()
		d.serveReload(w, req)
		return w
	}
	if w := post("Bearer anything-at-all-here"); w.Code != http.StatusForbidden || !strings.Contains(w.Body.String(), "reload_token_file") {
		t.Errorf("without reload_token_file: %d %q, want 403 naming the key", w.Code, w.Body)
	}
	file := filepath.Join(t.TempDir(), "reload.tokens")
	if err := os.WriteFile(file, []byte("deployer 0123456789abcdef-reload\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	d.reload.c.ReloadTokenFile = file
	for _, auth := range []string{"", "Bearer ", "Bearer 0123456789abcdef-reloaX", "bearer 0123456789abcdef-reload", "0123456789abcdef-reload", "Bearer deployer"} {
		w := post(auth)
		if w.Code != http.StatusUnauthorized || w.Header().Get("WWW-Authenticate") == "" {
			t.Errorf("Authorization %q: %d (WWW-Authenticate %q), want 401 with a challenge", auth, w.Code, w.Header().Get("WWW-Authenticate"))
		}
	}
	if name, err := reloadCaller(file, "Bearer 0123456789abcdef-reload"); name != "deployer" || err != nil {
		t.Errorf("reloadCaller(the token) = %q, %v; want deployer", name, err)
	}
	// A token file others can read is no authentication.
	if err := os.Chmod(file, 0o644); err != nil {
		t.Fatal(err)
	}
	if name, err := reloadCaller(file, "Bearer 0123456789abcdef-reload"); err == nil {
		t.Errorf("a world-readable token file authenticated %q", name)
	}
}

// TestChangedKeys names what changed between two versions of a config as
// key paths, and only that.
func TestChangedKeys(t *testing.T) {
	const base = "listen: 127.0.0.1:1\nmattermost:\n  url: http://a\n  token_file: /t\nchannels:\n  - id: a\n    workspace: /w\n"
	for _, tc := range []struct {
		name, cur string
		want      []string
	}{
		{"same, reformatted", "# comment\nlisten:   127.0.0.1:1\nmattermost: {url: 'http://a', token_file: /t}\nchannels: [{workspace: /w, id: a}]\n", nil},
		{"nested", strings.Replace(base, "http://a", "http://b", 1), []string{"mattermost.url"}},
		{"list item", strings.Replace(base, "/w\n", "/v\n", 1), []string{"channels[0].workspace"}},
		{"list length", base + "  - id: b\n    workspace: /w\n", []string{"channels"}},
		{"added and removed", "mattermost:\n  url: http://a\n  token_file: /t\nchannels:\n  - id: a\n    workspace: /w\nusers: [x]\n", []string{"listen", "users"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			old, err := rawConfig([]byte(base))
			if err != nil {
				t.Fatal(err)
			}
			cur, err := rawConfig([]byte(tc.cur))
			if err != nil {
				t.Fatal(err)
			}
			if got := changedKeys(old, cur, ""); !slices.Equal(got, tc.want) {
				t.Errorf("changedKeys = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestReloadableKeysExist: every key reloadable names is a top-level key
// of the config file, so that a renamed key cannot leave a stale entry
// behind (a new key needs a restart until it is listed).
func TestReloadableKeysExist(t *testing.T) {
	keys := map[string]bool{}
	for f := range reflect.TypeFor[daemonConfig]().Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		keys[name] = true
		if name != "" && reloadable(name) != slices.Contains(reloadableKeys(), name) {
			t.Errorf("reloadable(%q) disagrees with the list", name)
		}
	}
	for _, k := range reloadableKeys() {
		if !keys[k] || !reloadable(k) {
			t.Errorf("reloadable lists %q, which is no top-level key of the config file", k)
		}
	}
	for _, k := range []string{"listen", "state_dir", "platform", "mattermost", "slack", "sandbox", "limits", "model", "reload_token_file", "max_concurrent_runs"} {
		if reloadable(k) {
			t.Errorf("%s is reloadable; it is built once at start", k)
		}
	}
}
