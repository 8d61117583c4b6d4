package gate_test

import (
	"fmt"

	"github.com/thinbot/thinbot/gate"
)

func ExamplePolicy_Classify() {
	p := gate.DefaultPolicy()
	for _, cmd := range []string{
		"df -h && free -m",
		"ls > files.txt",
		"cat /etc/../etc/shadow",
		"bash -c 'rm -rf /'",
	} {
		d := p.Classify(cmd)
		fmt.Printf("%-7s %-20s %s\n", d.Verdict, d.Rule, d.Reason)
	}
	// Output:
	// pass    read-only            every command is on the read-only table with safe arguments
	// confirm syntax.redirect-write writes to a file through redirection >
	// confirm secret.path          reads /etc/../etc/shadow, a sensitive path (matches /etc/shadow*)
	// deny    deny.recursive-root  `rm` recursively on / is never run
}
