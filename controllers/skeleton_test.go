package controllers

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const (
	modulePath   = "github.com/minictl/minictl/controllers/"
	skeletonPath = modulePath + "internal/controller"
)

// TestEveryControllerUsesTheSkeleton reads the source of every controller
// the manager knows, and of every package under controllers/, and checks
// that each is built on controllers/internal/controller the same way, so
// that a controller added tomorrow cannot quietly grow its own loop:
//
//   - the manager's table wires every controller package, by its Name, and
//     builds it from the Common options;
//   - Options embeds controller.Common, and New completes it with Name;
//   - Run starts controller.Workers(workers);
//   - every processNextWorkItem hands the sync's result to
//     controller.HandleErr, and nothing else in the package forgets a key
//     or makes a workqueue of its own;
//   - no package declares its own event recorder, attaches the controller
//     attribute to its logger itself, falls back to slog.Default(), or reads
//     time.Now instead of its clock.
func TestEveryControllerUsesTheSkeleton(t *testing.T) {
	wired := append(wiredPackages(t, "wiring.go", "knownControllers"), wiredPackages(t, "cloudwiring.go", "cloudControllers")...)
	tables := append(slices.Clip(knownControllers), cloudControllers...)
	if len(wired) != len(tables) {
		t.Fatalf("wiring.go and cloudwiring.go wire %d packages by Name, the tables have %d controllers", len(wired), len(tables))
	}

	// The simulated ingress controller stands for a third party's and runs
	// beside the managers (cmd/minictl), but is built the same way.
	standalone := []string{"ingress"}

	dirs, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		if d.IsDir() && d.Name() != "internal" && d.Name() != "testdata" {
			if !slices.Contains(wired, d.Name()) && !slices.Contains(standalone, d.Name()) {
				t.Errorf("controllers/%s is in no manager's table (wiring.go, cloudwiring.go)", d.Name())
			}
		}
	}

	names := map[string]bool{}
	for _, pkg := range wired {
		t.Run(pkg, func(t *testing.T) {
			name := checkSkeleton(t, pkg)
			names[name] = true
		})
	}
	for _, pkg := range standalone {
		t.Run(pkg, func(t *testing.T) { checkSkeleton(t, pkg) })
	}
	for _, d := range tables {
		if !names[d.name] {
			t.Errorf("the manager runs %q, which no controller package calls itself", d.name)
		}
	}
}

// wiredPackages returns the directory of every package whose Name names an
// entry of the table variable in file, checking on the way that the entry
// builds it from cc.Common.
func wiredPackages(t *testing.T, file, table string) []string {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, file, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	dirOf := map[string]string{} // import name → directory under controllers/
	for _, imp := range f.Imports {
		p, _ := strconv.Unquote(imp.Path.Value)
		if strings.HasPrefix(p, modulePath) {
			dirOf[filepath.Base(p)] = strings.TrimPrefix(p, modulePath)
		}
	}
	var out []string
	ast.Inspect(f, func(n ast.Node) bool {
		vs, ok := n.(*ast.ValueSpec)
		if !ok || len(vs.Names) != 1 || vs.Names[0].Name != table {
			return true
		}
		for _, elt := range vs.Values[0].(*ast.CompositeLit).Elts {
			entry := elt.(*ast.CompositeLit)
			var pkg string
			var build ast.Node
			for _, kv := range entry.Elts {
				kv := kv.(*ast.KeyValueExpr)
				switch kv.Key.(*ast.Ident).Name {
				case "name":
					if sel, ok := kv.Value.(*ast.SelectorExpr); ok && sel.Sel.Name == "Name" {
						pkg = sel.X.(*ast.Ident).Name
					}
				case "build":
					build = kv.Value
				}
			}
			if pkg == "" || dirOf[pkg] == "" {
				t.Errorf("%s: a controller whose name is not <package>.Name", fset.Position(entry.Pos()))
				continue
			}
			if !buildsFromCommon(build, pkg) {
				t.Errorf("%s: %s is not built as %s.New(%s.Options{Common: cc.Common, ...})", fset.Position(entry.Pos()), pkg, pkg, pkg)
			}
			out = append(out, dirOf[pkg])
		}
		return false
	})
	return out
}

// buildsFromCommon reports whether build calls pkg.New(pkg.Options{Common:
// cc.Common, ...}).
func buildsFromCommon(build ast.Node, pkg string) bool {
	found := false
	ast.Inspect(build, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok || !isSelector(call.Fun, pkg, "New") || len(call.Args) != 1 {
			return true
		}
		lit, ok := call.Args[0].(*ast.CompositeLit)
		if !ok || !isSelector(lit.Type, pkg, "Options") {
			return true
		}
		for _, e := range lit.Elts {
			if kv, ok := e.(*ast.KeyValueExpr); ok && kv.Key.(*ast.Ident).Name == "Common" && isSelector(kv.Value, "cc", "Common") {
				found = true
			}
		}
		return true
	})
	return found
}

// checkSkeleton checks one controller package's source and returns its
// Name.
func checkSkeleton(t *testing.T, dir string) string {
	fset := token.NewFileSet()
	paths, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	for _, p := range paths {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, p, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	var (
		name                  string
		embedsCommon          bool
		completes             bool
		runGuards             bool
		makesQueue            bool
		processNextWorkItems  int
		processNextHandlesErr int
	)
	at := func(n ast.Node) string { return fset.Position(n.Pos()).String() }
	for _, f := range files {
		skeleton := importName(f, skeletonPath)
		for _, decl := range f.Decls {
			switch d := decl.(type) {
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					switch s := spec.(type) {
					case *ast.ValueSpec:
						if d.Tok == token.CONST && len(s.Names) == 1 && s.Names[0].Name == "Name" {
							if lit, ok := s.Values[0].(*ast.BasicLit); ok {
								name, _ = strconv.Unquote(lit.Value)
							}
						}
					case *ast.TypeSpec:
						switch s.Name.Name {
						case "Options":
							st, ok := s.Type.(*ast.StructType)
							if ok {
								for _, fld := range st.Fields.List {
									if len(fld.Names) == 0 && isSelector(fld.Type, skeleton, "Common") {
										embedsCommon = true
									}
								}
							}
						case "EventRecorder":
							t.Errorf("%s: an EventRecorder of its own; take record.EventRecorder", at(s))
						}
					}
				}
			case *ast.FuncDecl:
				switch {
				case d.Name.Name == "Event" || d.Name.Name == "Eventf":
					t.Errorf("%s: a recorder of its own (%s); a nil Recorder is record.Discard", at(d), d.Name.Name)
				case d.Recv == nil && d.Name.Name == "New":
					completes = calls(d.Body, func(c *ast.CallExpr) bool {
						sel, ok := c.Fun.(*ast.SelectorExpr)
						return ok && sel.Sel.Name == "Complete" && len(c.Args) == 1 && isIdent(c.Args[0], "Name")
					})
				case d.Recv != nil && d.Name.Name == "Run":
					runGuards = calls(d.Body, func(c *ast.CallExpr) bool { return isSelector(c.Fun, skeleton, "Workers") })
				case d.Recv != nil && d.Name.Name == "processNextWorkItem":
					processNextWorkItems++
					if calls(d.Body, func(c *ast.CallExpr) bool { return isSelector(c.Fun, skeleton, "HandleErr") }) {
						processNextHandlesErr++
					} else {
						t.Errorf("%s: processNextWorkItem does not call controller.HandleErr", at(d))
					}
					calls(d.Body, func(c *ast.CallExpr) bool {
						if sel, ok := c.Fun.(*ast.SelectorExpr); ok && slices.Contains([]string{"AddRateLimited", "AddAfter", "Add"}, sel.Sel.Name) {
							t.Errorf("%s: processNextWorkItem decides with %s itself; controller.HandleErr decides", at(c), sel.Sel.Name)
						}
						return false
					})
				}
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			if fun, ok := call.Fun.(*ast.SelectorExpr); ok {
				switch {
				case isSelector(fun, skeleton, "NewQueue"):
					makesQueue = true
				case isSelector(fun, importName(f, "github.com/minictl/minictl/informer/workqueue"), "New"):
					t.Errorf("%s: workqueue.New; controller.NewQueue makes a queue on the controller's clock and metrics", at(call))
				case fun.Sel.Name == "Forget":
					t.Errorf("%s: %s forgets a key; only controller.HandleErr does", at(call), dir)
				case isSelector(fun, "slog", "Default"):
					t.Errorf("%s: slog.Default(); a nil Logger discards, everywhere", at(call))
				case fun.Sel.Name == "With" || isSelector(fun, "slog", "String"):
					if len(call.Args) > 0 && isString(call.Args[0], "controller") {
						t.Errorf("%s: attaches the controller attribute itself; Complete(Name) does, once", at(call))
					}
				}
			}
			return true
		})
		ast.Inspect(f, func(n ast.Node) bool {
			if isSelector(n, "time", "Now") {
				t.Errorf("%s: time.Now; read the controller's clock", at(n))
			}
			return true
		})
	}
	if name == "" {
		t.Errorf("no const Name = \"<kube-controller-manager name>\"")
	}
	if !embedsCommon {
		t.Errorf("Options does not embed controller.Common")
	}
	if !completes {
		t.Errorf("New does not call Complete(Name) on its options")
	}
	if !runGuards {
		t.Errorf("Run does not start controller.Workers(workers)")
	}
	if makesQueue && processNextWorkItems == 0 {
		t.Errorf("it has a workqueue but no processNextWorkItem")
	}
	return name
}

// importName is the name f refers to the package at path by, or "".
func importName(f *ast.File, path string) string {
	for _, imp := range f.Imports {
		if p, _ := strconv.Unquote(imp.Path.Value); p == path {
			if imp.Name != nil {
				return imp.Name.Name
			}
			return filepath.Base(p)
		}
	}
	return ""
}

// calls reports whether some call in n satisfies match.
func calls(n ast.Node, match func(*ast.CallExpr) bool) bool {
	found := false
	ast.Inspect(n, func(n ast.Node) bool {
		if c, ok := n.(*ast.CallExpr); ok && match(c) {
			found = true
		}
		return true
	})
	return found
}

func isSelector(n ast.Node, x, sel string) bool {
	s, ok := n.(*ast.SelectorExpr)
	return ok && x != "" && isIdent(s.X, x) && s.Sel.Name == sel
}

func isIdent(n ast.Node, name string) bool {
	id, ok := n.(*ast.Ident)
	return ok && id.Name == name
}

func isString(n ast.Node, s string) bool {
	lit, ok := n.(*ast.BasicLit)
	return ok && lit.Kind == token.STRING && lit.Value == strconv.Quote(s)
}
