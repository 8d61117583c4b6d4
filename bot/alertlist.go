package bot

import (
	"fmt"
	"slices"
	"strings"

	"github.com/thinbot/thinbot/agentcore"
	"github.com/thinbot/thinbot/agentcore/textfmt"
)

// A group's card and its update lines name the group's alerts one by one,
// so that a second alert joining the group does not hide the first one's
// instance and summary behind the labels the two share, and an update
// says which alert joined or resolved, not how many.

// cardAlerts bounds the alerts a card lists; changeNames bounds the names
// an update line gives for one kind of change. The rest are counted.
const (
	cardAlerts  = 10
	changeNames = 5
)

// sharedLabels returns the labels every alert of rs has with the same
// value.
func sharedLabels(rs []agentcore.AlertRecord) map[string]string {
	if len(rs) == 0 {
		return map[string]string{}
	}
	out := map[string]string{}
	for k, v := range rs[0].Labels {
		out[k] = v
	}
	for _, r := range rs[1:] {
		for k, v := range out {
			if r.Labels[k] != v {
				delete(out, k)
			}
		}
	}
	return out
}

// alertName is what tells r apart from the alerts whose shared labels are
// shared: its other labels (at most three, in name order), else its
// instance, else its fingerprint; quoted in a code span.
func alertName(r agentcore.AlertRecord, shared map[string]string) string {
	var kv []string
	for _, k := range sortedKeys(r.Labels) {
		if _, ok := shared[k]; ok {
			continue
		}
		kv = append(kv, k+"="+r.Labels[k])
	}
	if len(kv) > 3 {
		kv = append(kv[:3], "…")
	}
	switch {
	case len(kv) > 0:
		return textfmt.CodeSpan(strings.Join(kv, " "), 120)
	case r.Labels["instance"] != "":
		return textfmt.CodeSpan("instance="+r.Labels["instance"], 120)
	case r.Fingerprint != "":
		return textfmt.CodeSpan(r.Fingerprint, 40)
	}
	return textfmt.CodeSpan(r.Labels["alertname"], 80)
}

// alertList is the card's list of a group of more than one alert: one
// line each, firing ones first, with its own summary where the group has
// none in common (summary is the common one, "" if none); at most
// cardAlerts lines, then how many more.
func alertList(rs []agentcore.AlertRecord, summary string) string {
	if len(rs) < 2 {
		return ""
	}
	shared := sharedLabels(rs)
	sorted := slices.Clone(rs)
	slices.SortStableFunc(sorted, func(x, y agentcore.AlertRecord) int {
		return boolOrder(x.Status != "firing") - boolOrder(y.Status != "firing")
	})
	var b strings.Builder
	b.WriteString("**Alerts:**\n")
	for i, r := range sorted {
		if i == cardAlerts {
			fmt.Fprintf(&b, "- … and %d more\n", len(sorted)-cardAlerts)
			break
		}
		icon := "🔥"
		if r.Status != "firing" {
			icon = "✅"
		}
		fmt.Fprintf(&b, "- %s %s", icon, alertName(r, shared))
		if s := r.Annotations["summary"]; s != "" && s != summary {
			fmt.Fprintf(&b, " · %s", textfmt.CodeSpan(s, 200))
		}
		b.WriteString("\n")
	}
	return b.String()
}

func boolOrder(b bool) int {
	if b {
		return 1
	}
	return 0
}

// alertKey identifies an alert across notifications: its fingerprint, or
// its labels when the notifier sent none.
func alertKey(r agentcore.AlertRecord) string {
	if r.Fingerprint != "" {
		return r.Fingerprint
	}
	var b strings.Builder
	for _, k := range sortedKeys(r.Labels) {
		b.WriteString(k + "\x00" + r.Labels[k] + "\x00")
	}
	return b.String()
}

// alertChanges says what changed from the alerts of the last notification
// to those of this one: "`instance=web-2` joined; `instance=web-1`
// resolved" ("" if nothing did). Names are told apart over both
// notifications' alerts.
func alertChanges(old, cur []agentcore.AlertRecord) string {
	was := map[string]string{}
	for _, r := range old {
		was[alertKey(r)] = r.Status
	}
	shared := sharedLabels(append(slices.Clone(old), cur...))
	var joined, resolved, again []string
	for _, r := range cur {
		st, ok := was[alertKey(r)]
		switch {
		case !ok && r.Status == "firing":
			joined = append(joined, alertName(r, shared))
		case ok && st == "firing" && r.Status != "firing":
			resolved = append(resolved, alertName(r, shared))
		case ok && st != "firing" && r.Status == "firing":
			again = append(again, alertName(r, shared))
		}
	}
	var parts []string
	for _, c := range []struct {
		names []string
		verb  string
	}{{joined, "joined"}, {resolved, "resolved"}, {again, "firing again"}} {
		if len(c.names) == 0 {
			continue
		}
		names := c.names
		more := ""
		if len(names) > changeNames {
			more = fmt.Sprintf(" and %d more", len(names)-changeNames)
			names = names[:changeNames]
		}
		parts = append(parts, strings.Join(names, ", ")+more+" "+c.verb)
	}
	return strings.Join(parts, "; ")
}
