package fleet

import (
	"bufio"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

var (
	reSeenKey   = regexp.MustCompile(`The fingerprint for the (\S+) key sent by the remote host is\s+(SHA256:[A-Za-z0-9+/=]+)`)
	reOffending = regexp.MustCompile(`Offending (\S+) key in (.+):(\d+)`)
	reChangedOn = regexp.MustCompile(`Host key for (\S+) has changed`)
	reUnknown   = regexp.MustCompile(`No (\S+) host key is known for (\S+) and you have requested strict checking`)
)

// sshError turns what ssh wrote before it gave up into the host's error
// for the model and the chat. A changed host key is said plainly (host key
// changed, the fingerprint known_hosts holds and the one the host
// presented, possible man-in-the-middle, nothing ran) instead of ssh's
// last lines, which are a recipe for removing the trusted key; an unknown
// host key likewise. Anything else is ssh's last three lines.
//
// The fingerprint known_hosts holds is read from the file ssh names only
// when that is the configured known_hosts (or, with none configured, a
// file named known_hosts or ssh_known_hosts): the text before the start
// marker can come from the remote side too, and must not make the daemon
// hash lines of any file it names.
func sshError(msg, knownHosts string) string {
	msg = strings.ReplaceAll(msg, "\r", "")
	if strings.Contains(msg, "REMOTE HOST IDENTIFICATION HAS CHANGED") || reChangedOn.MatchString(msg) {
		var b strings.Builder
		b.WriteString("host key changed")
		if m := reChangedOn.FindStringSubmatch(msg); m != nil {
			b.WriteString(" for " + m[1])
		}
		b.WriteString(": ")
		if m := reOffending.FindStringSubmatch(msg); m != nil {
			fp := "(not read: not the configured known_hosts)"
			if trustedKnownHosts(m[2], knownHosts) {
				if fp = knownHostsFingerprint(m[2], m[3]); fp == "" {
					fp = "(unreadable)"
				}
			}
			fmt.Fprintf(&b, "known_hosts expects %s %s (%s line %s)", m[1], fp, m[2], m[3])
		} else {
			b.WriteString("known_hosts expects another key")
		}
		if m := reSeenKey.FindStringSubmatch(msg); m != nil {
			fmt.Fprintf(&b, ", the host presented %s %s", m[1], strings.TrimSuffix(m[2], "."))
		}
		b.WriteString(". This may be a man-in-the-middle attack; nothing ran on this host. " +
			"Verify the host's key out of band (on its console: ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub) " +
			"before an operator changes known_hosts; thinbot never changes it. (ssh: Host key verification failed.)")
		return b.String()
	}
	if m := reUnknown.FindStringSubmatch(msg); m != nil {
		return fmt.Sprintf("host key unknown: known_hosts has no %s key for %s; nothing ran on this host. "+
			"An operator adds the host's key to known_hosts after verifying it out of band. (ssh: Host key verification failed.)", m[1], m[2])
	}
	return lastLines(strings.TrimSpace(msg), 3)
}

func trustedKnownHosts(path, configured string) bool {
	if configured != "" {
		return filepath.Clean(path) == filepath.Clean(configured)
	}
	b := filepath.Base(path)
	return b == "known_hosts" || b == "ssh_known_hosts"
}

// knownHostsFingerprint returns the SHA256 fingerprint of the key on line
// n of a known_hosts file, as ssh prints it; "" if it cannot be read.
func knownHostsFingerprint(path, line string) string {
	n, err := strconv.Atoi(line)
	if err != nil {
		return ""
	}
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for i := 1; sc.Scan(); i++ {
		if i == n {
			return keyFingerprint(sc.Text())
		}
	}
	return ""
}

// keyFingerprint is the fingerprint of a known_hosts line: [marker] hosts
// type base64 [comment].
func keyFingerprint(line string) string {
	f := strings.Fields(line)
	if len(f) > 0 && strings.HasPrefix(f[0], "@") {
		f = f[1:]
	}
	if len(f) < 3 {
		return ""
	}
	blob, err := base64.StdEncoding.DecodeString(f[2])
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(blob)
	return "SHA256:" + base64.RawStdEncoding.EncodeToString(sum[:])
}
