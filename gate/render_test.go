package gate

import "testing"

// TestProgram: the program a decision carries is the judged tree rendered
// back, on one line where the command was written on one, and it parses
// back to the tree the gate judged.
func TestProgram(t *testing.T) {
	p := testPolicy(t)
	cases := []struct{ cmd, program string }{
		{"df -h", "df -h"},
		{"a;b", "a; b"},
		{"cd /srv && ls; echo done", "cd /srv && ls; echo done"},
		{"ls   -la  /var/log", "ls -la /var/log"},
		{"ls > out.txt 2>/dev/null", "ls >out.txt 2>/dev/null"},
		{"ls -la # a comment", "ls -la"},
		{"(cd /x; ls)", "(cd /x; ls)"},
		{"for f in a b; do wc -l \"$f\"; done", "for f in a b; do wc -l \"$f\"; done"},
		{"f() { ls; }; f", "f() { ls; }; f"},
		// One line would lose the separator after a body that ends in &
		// (the printer's single-line mode writes `g() { ls & } g`, which
		// bash refuses): several lines.
		{"g() { ls & }; g", "g() { ls & }\ng"},
		{"kubectl get pods \\\n  -n prod", "kubectl get pods \\\n\t-n prod"},
		{"cat <<EOF\nhi\nEOF", "cat <<EOF\nhi\nEOF"},
		// The gate's reading, not bash's: the next line is operands of ls.
		{"ls #\\\ntouch made", "ls \\\n\ttouch made"},
		{"echo `id`", "echo $(id)"},
	}
	for _, c := range cases {
		d := p.Classify(c.cmd)
		if d.Program != c.program {
			t.Errorf("Classify(%q).Program = %q, want %q", c.cmd, d.Program, c.program)
		}
		f, err := parse(c.cmd)
		if err != nil {
			t.Fatal(err)
		}
		if f2, err := parse(d.Program); err != nil || (!sameTree(f, f2) && d.Verdict == Pass) {
			t.Errorf("Classify(%q) = pass with a program that reads back otherwise (%v)", c.cmd, err)
		}
	}
	if d := p.Classify("ls 'unterminated"); d.Program != "" || d.Verdict != Confirm {
		t.Errorf("a command that does not parse: %+v, want confirm and no program", d)
	}
}

// TestSameTree: positions aside, any difference is a different tree.
func TestSameTree(t *testing.T) {
	for _, c := range []struct {
		a, b string
		same bool
	}{
		{"ls -la", "ls  -la", true},
		{"ls -la", "ls -la\n", true},
		{"a; b", "a\nb", true},
		{"ls -la", "ls -al", false},
		{"echo $(id)", "echo `id`", false},
		{"cat <<EOF\n$x\nEOF", "cat <<'EOF'\n$x\nEOF", false},
		{"a && b", "a || b", false},
		{"a | b", "a |& b", false},
	} {
		fa, err := parse(c.a)
		if err != nil {
			t.Fatal(err)
		}
		fb, err := parse(c.b)
		if err != nil {
			t.Fatal(err)
		}
		if got := sameTree(fa, fb); got != c.same {
			t.Errorf("sameTree(%q, %q) = %v, want %v", c.a, c.b, got, c.same)
		}
	}
}
