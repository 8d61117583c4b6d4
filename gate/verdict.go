package gate

import "fmt"

// Verdict is the gate's judgement of a command or path. The zero value is
// Deny, so a Decision that was never filled in is the safe one.
type Verdict int

// The three verdicts, from strictest to most permissive.
const (
	// Deny means the command never runs.
	Deny Verdict = iota
	// Confirm means a human must approve the command before it runs.
	Confirm
	// Pass means the command is read-only and may run at once.
	Pass
)

// String returns "deny", "confirm" or "pass"; any other value prints as
// "verdict(N)".
func (v Verdict) String() string {
	switch v {
	case Deny:
		return "deny"
	case Confirm:
		return "confirm"
	case Pass:
		return "pass"
	}
	return fmt.Sprintf("verdict(%d)", int(v))
}

// MarshalText encodes the verdict as its name, so a Verdict reads as
// "deny", "confirm" or "pass" in JSON and YAML. It fails for values outside
// the three verdicts.
func (v Verdict) MarshalText() ([]byte, error) {
	switch v {
	case Deny, Confirm, Pass:
		return []byte(v.String()), nil
	}
	return nil, fmt.Errorf("gate: invalid verdict %d", int(v))
}

// UnmarshalText decodes a verdict name as written by MarshalText.
func (v *Verdict) UnmarshalText(b []byte) error {
	switch string(b) {
	case "deny":
		*v = Deny
	case "confirm":
		*v = Confirm
	case "pass":
		*v = Pass
	default:
		return fmt.Errorf("gate: unknown verdict %q", b)
	}
	return nil
}

// Decision is the outcome of one classification: the verdict, a sentence a
// human can read in a chat message, and the name of the rule that decided
// (for the audit log and for grepping the policy). The zero Decision is a
// Deny with no reason.
//
// Program is the text the shell must run for the verdict to hold: the
// gate's own rendering of the tree it judged (see [Policy.ClassifyIn]).
// It is empty when the command could not be parsed; what runs is then the
// command as written, and only after a human approved it.
type Decision struct {
	Verdict Verdict `json:"verdict"`
	Reason  string  `json:"reason"`
	Rule    string  `json:"rule"`
	Program string  `json:"program,omitempty"`
}

func deny(rule, format string, a ...any) Decision {
	return Decision{Verdict: Deny, Rule: rule, Reason: fmt.Sprintf(format, a...)}
}

func confirm(rule, format string, a ...any) Decision {
	return Decision{Verdict: Confirm, Rule: rule, Reason: fmt.Sprintf(format, a...)}
}
