package tests

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// decl is one name declared in the tree: its package's name, and for a
// method, field or interface method the type it belongs to.
type decl struct {
	pkg, owner string
	test       bool     // declared under tests/: only Test names count
	params     int      // a function's parameter count; -1 for anything else
	names      []string // a function's parameter names
}

// declared indexes every top-level name of the module's Go files (tests
// included, for test names), with methods, struct fields and interface
// methods under their type.
func declared(t *testing.T, root string) map[string][]decl {
	t.Helper()
	names := map[string][]decl{}
	var inTests bool
	add := func(name string, d decl) {
		d.test = inTests
		names[name] = append(names[name], d)
	}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.IsDir() && (strings.HasPrefix(e.Name(), ".") || e.Name() == "node_modules") && path != root {
			return filepath.SkipDir
		}
		if e.IsDir() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		pkg := f.Name.Name
		rel, _ := filepath.Rel(root, path)
		inTests = strings.HasPrefix(filepath.ToSlash(rel), "tests/")
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				n, pn := 0, []string(nil)
				for _, p := range d.Type.Params.List {
					n += max(1, len(p.Names))
					for _, id := range p.Names {
						pn = append(pn, id.Name)
					}
				}
				owner := ""
				if d.Recv != nil && len(d.Recv.List) == 1 {
					owner = recvName(d.Recv.List[0].Type)
				}
				add(d.Name.Name, decl{pkg: pkg, owner: owner, params: n, names: pn})
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						add(s.Name.Name, decl{pkg: pkg, params: -1})
						var fields *ast.FieldList
						switch ty := s.Type.(type) {
						case *ast.InterfaceType:
							fields = ty.Methods
						case *ast.StructType:
							fields = ty.Fields
						}
						if fields == nil {
							continue
						}
						for _, fl := range fields.List {
							for _, n := range fl.Names {
								add(n.Name, decl{pkg: pkg, owner: s.Name.Name, params: -1})
							}
						}
					case *ast.ValueSpec:
						for _, n := range s.Names {
							add(n.Name, decl{pkg: pkg, params: -1})
						}
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return names
}

func recvName(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.StarExpr:
		return recvName(e.X)
	case *ast.IndexExpr:
		return recvName(e.X)
	case *ast.Ident:
		return e.Name
	}
	return ""
}

var (
	codeSpan  = regexp.MustCompile("`([^`\n]+(?:\n[^`\n]+)?)`") // a span may wrap once
	callForm  = regexp.MustCompile(`^([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)\(([^()]*)\)$`)
	qualified = regexp.MustCompile(`^[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+$`)
	exported  = regexp.MustCompile(`^[A-Z]\w*$`)
)

// TestArchitectureNamesExist keeps ARCHITECTURE.md true to the code: every
// Go name it writes as code outside the diagrams (`Agent.Run`,
// `sandbox.HideEnviron`, `ChannelResolver`) is declared in the tree, under
// the package or type it is qualified with; a call written with its
// parameters (`run(ctx, e, args)`) has those parameter names; and every interface
// package bot defines for the adapters is named.
func TestArchitectureNamesExist(t *testing.T) {
	root := ".."
	doc, err := os.ReadFile(filepath.Join(root, "ARCHITECTURE.md"))
	if err != nil {
		t.Fatal(err)
	}
	names := declared(t, root)
	var prose strings.Builder
	fenced := false
	for _, line := range strings.Split(string(doc), "\n") {
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
			continue
		}
		if !fenced {
			prose.WriteString(line + "\n")
		}
	}
	// Qualifiers of ours: package and type names. `http.Client` or
	// `model.Client4` (an SDK's) are not checked.
	ours := map[string]bool{}
	for name, ds := range names {
		for _, d := range ds {
			ours[d.pkg] = true
			if d.params == -1 && d.owner == "" {
				ours[name] = true
			}
		}
	}
	checked := 0
	named := map[string]bool{}
	for _, m := range codeSpan.FindAllStringSubmatch(prose.String(), -1) {
		span, params := strings.Join(strings.Fields(m[1]), " "), []string(nil)
		if c := callForm.FindStringSubmatch(span); c != nil {
			span = c[1]
			for _, p := range strings.Split(c[2], ",") {
				if p = strings.TrimSpace(p); p != "" {
					params = append(params, p)
				}
			}
		} else if !qualified.MatchString(span) && !exported.MatchString(span) {
			continue // a command, a file, an event type, a config key
		}
		parts := strings.Split(span, ".")
		name := parts[len(parts)-1]
		if len(parts) > 1 && !ours[parts[0]] {
			continue
		}
		named[name] = true
		checked++
		found := false
		for _, d := range names[name] {
			if d.test && !strings.HasPrefix(name, "Test") {
				continue // the tests' helpers and commands are not the product
			}
			if len(parts) > 1 && !contains(parts[:len(parts)-1], d.pkg) && !contains(parts[:len(parts)-1], d.owner) {
				continue
			}
			if params != nil && !slices.Equal(d.names, params) {
				continue
			}
			found = true
		}
		if !found {
			what := "is not declared in the tree"
			if params != nil {
				what = "with these parameter names is not declared in the tree"
			}
			t.Errorf("ARCHITECTURE.md names `%s` %s: change the doc or the code", m[1], what)
		}
	}
	if checked < 20 {
		t.Errorf("only %d names checked in ARCHITECTURE.md; the code spans were not read", checked)
	}
	for name, ds := range names {
		for _, d := range ds {
			if d.pkg == "bot" && d.owner == "" && d.params == -1 && exported.MatchString(name) && isInterface(t, root, name) && !named[name] {
				t.Errorf("package bot defines the interface %s, which ARCHITECTURE.md does not name", name)
			}
		}
	}
}

// isInterface reports whether package bot declares name as an interface.
func isInterface(t *testing.T, root, name string) bool {
	t.Helper()
	pkgs, err := filepath.Glob(filepath.Join(root, "bot", "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`(?m)^type ` + name + ` interface\b`)
	for _, p := range pkgs {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		src, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if re.Match(src) {
			return true
		}
	}
	return false
}
