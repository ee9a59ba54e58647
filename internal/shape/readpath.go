// Package shape checks the shape of the code that issue 38 asks for. Follow
// walks one verb the way a reader does: from the service's handler, call by
// call in source order, through the engine to its ports, and counts how
// often the walk goes back to a file it had left. The package's tests keep
// that count bounded and the packages' imports within their layers.
//
// The walk is static and typed (go/types over the module's own packages,
// their imports read from the go command's export data):
//   - a stop is a function or method of the module's production code (no
//     _test.go file), visited once, in depth-first order of the references
//     in the bodies before it (calls, method values, method expressions);
//   - a call through a function value (a table of handlers, a field of
//     functions) goes on where Calls says that value leads for the verb
//     followed, and stops there otherwise;
//   - a call through an interface goes on to the implementation that Impl
//     names for that interface, and stops there otherwise (the ports);
//   - where a body chooses by verb (a switch case, a keyed literal or a
//     table entry whose constant is a verb name), only the followed verb's
//     branch is walked;
//   - packages in Skip are not entered (the bus and store adapters behind
//     the ports);
//   - a function shorter than Lines is read through, not stopped at: its
//     own references are walked in its place, as a reader takes in a short
//     helper from its name and goes on.
//
// A return is a stop in a file the walk had been in and left before.
//
// It imports only the standard library and runs the go command.
package shape

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/constant"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// Config says where the walk starts and what it follows.
type Config struct {
	Dir    string            // a directory of the module
	Module string            // the module path
	Start  string            // the first stop: "<pkg path>.<Type>.<Method>" or "<pkg path>.<Func>"
	Verb   string            // the verb followed: other verbs' branches are not walked
	Verbs  []string          // every verb name, to know a branch of another verb
	Impl   map[string]string // "<pkg>.<Interface>" → "<pkg>.<Type>" followed through calls on it
	Skip   []string          // package paths not entered
	// Calls says where a call through a function value leads for the verb
	// followed: for a package-level variable ("<pkg>.<name>", a table of
	// handlers) or a struct field ("<pkg>.<Type>.<field>"), the function
	// the walk goes on to when a body reads it.
	Calls map[string]string
	Lines int // a function shorter than this is walked through but is no stop
}

// Stop is one function of the walk.
type Stop struct {
	Func string // its key
	File string // its file, relative to the module
	Line int
}

// Walk is the result: the stops in order, and the returns to files left.
type Walk struct {
	Stops   []Stop
	Trace   []string // the files the reader is in, in order: into each stop and back to its caller
	Files   int      // distinct files
	Returns []string // "<file> (stop N: <func>)" for each return to a file left
	// TraceReturns counts the returns to a file left in Trace, where going
	// back to a caller's file after a callee in another file is one.
	TraceReturns int
}

func returns(trace []string) int {
	n := 0
	left := map[string]bool{}
	for i := 1; i < len(trace); i++ {
		if trace[i] != trace[i-1] {
			left[trace[i-1]] = true
			if left[trace[i]] {
				n++
			}
		}
	}
	return n
}

type fn struct {
	key  string
	file string
	line int
	decl *ast.FuncDecl
	info *types.Info
}

type world struct {
	cfg   Config
	fset  *token.FileSet
	funcs map[string]*fn
	verbs map[string]bool
}

type listed struct {
	ImportPath string
	Dir        string
	GoFiles    []string
	Export     string
	Module     *struct{ Path string }
}

// Follow loads the module's packages and walks from cfg.Start.
func Follow(cfg Config) (*Walk, error) {
	dir, err := filepath.Abs(cfg.Dir)
	if err != nil {
		return nil, err
	}
	cfg.Dir = dir
	pkgs, exports, err := list(cfg.Dir, cfg.Module)
	if err != nil {
		return nil, err
	}
	w := &world{cfg: cfg, fset: token.NewFileSet(), funcs: map[string]*fn{}, verbs: map[string]bool{}}
	for _, v := range cfg.Verbs {
		w.verbs[v] = true
	}
	imp := importer.ForCompiler(w.fset, "gc", func(path string) (io.ReadCloser, error) {
		f, ok := exports[path]
		if !ok || f == "" {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(f)
	})
	for _, p := range pkgs {
		if err := w.load(p, imp); err != nil {
			return nil, err
		}
	}
	return w.walk()
}

func list(dir, module string) ([]listed, map[string]string, error) {
	cmd := exec.Command("go", "list", "-export", "-deps", "-json=ImportPath,Dir,GoFiles,Export,Module", "./...")
	cmd.Dir = dir
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return nil, nil, fmt.Errorf("go list: %w: %s", err, errb.String())
	}
	exports := map[string]string{}
	var own []listed
	dec := json.NewDecoder(&out)
	for dec.More() {
		var p listed
		if err := dec.Decode(&p); err != nil {
			return nil, nil, err
		}
		exports[p.ImportPath] = p.Export
		if p.Module != nil && p.Module.Path == module && len(p.GoFiles) > 0 {
			own = append(own, p)
		}
	}
	return own, exports, nil
}

func (w *world) load(p listed, imp types.Importer) error {
	var files []*ast.File
	for _, name := range p.GoFiles {
		f, err := parser.ParseFile(w.fset, filepath.Join(p.Dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		files = append(files, f)
	}
	info := &types.Info{Uses: map[*ast.Ident]types.Object{}, Types: map[ast.Expr]types.TypeAndValue{},
		Selections: map[*ast.SelectorExpr]*types.Selection{}, Defs: map[*ast.Ident]types.Object{}}
	conf := types.Config{Importer: imp, Error: func(error) {}}
	if _, err := conf.Check(p.ImportPath, w.fset, files, info); err != nil {
		return fmt.Errorf("type-check %s: %w", p.ImportPath, err)
	}
	for _, f := range files {
		for _, d := range f.Decls {
			w.declare(p.ImportPath, d, info)
		}
	}
	return nil
}

func (w *world) declare(pkg string, d ast.Decl, info *types.Info) {
	switch d := d.(type) {
	case *ast.FuncDecl:
		key := pkg + "." + d.Name.Name
		if d.Recv != nil && len(d.Recv.List) > 0 {
			key = pkg + "." + recvName(d.Recv.List[0].Type) + "." + d.Name.Name
		}
		pos := w.fset.Position(d.Pos())
		rel, _ := filepath.Rel(w.cfg.Dir, pos.Filename)
		w.funcs[key] = &fn{key: key, file: rel, line: pos.Line, decl: d, info: info}
	}
}

func recvName(e ast.Expr) string {
	switch t := e.(type) {
	case *ast.StarExpr:
		return recvName(t.X)
	case *ast.IndexExpr:
		return recvName(t.X)
	case *ast.IndexListExpr:
		return recvName(t.X)
	case *ast.Ident:
		return t.Name
	}
	return "?"
}

// keyOf names the function an identifier refers to, if it is one of the
// module's (or an interface method Impl maps).
func (w *world) keyOf(obj types.Object) string {
	switch o := obj.(type) {
	case *types.Func:
		if o.Pkg() == nil {
			return ""
		}
		sig, _ := o.Type().(*types.Signature)
		if sig == nil || sig.Recv() == nil {
			return o.Pkg().Path() + "." + o.Name()
		}
		rt := sig.Recv().Type()
		if p, ok := rt.(*types.Pointer); ok {
			rt = p.Elem()
		}
		named, ok := rt.(*types.Named)
		if !ok {
			return ""
		}
		tkey := named.Obj().Pkg().Path() + "." + named.Obj().Name()
		if types.IsInterface(named) {
			impl, ok := w.cfg.Impl[tkey]
			if !ok {
				return ""
			}
			tkey = impl
		}
		return tkey + "." + o.Name()
	case *types.Var:
		if o.Pkg() != nil && o.Parent() == o.Pkg().Scope() {
			return w.cfg.Calls[o.Pkg().Path()+"."+o.Name()]
		}
	}
	return ""
}

func (w *world) skipped(key string) bool {
	for _, s := range w.cfg.Skip {
		if strings.HasPrefix(key, s+".") {
			return true
		}
	}
	return false
}

func (w *world) walk() (*Walk, error) {
	if w.funcs[w.cfg.Start] == nil {
		return nil, fmt.Errorf("no function %s in the module", w.cfg.Start)
	}
	seen := map[string]bool{}
	res := &Walk{}
	var visit func(key string)
	refs := func(n ast.Node, info *types.Info) []string {
		var out []string
		ast.Inspect(n, func(x ast.Node) bool {
			if w.otherVerb(x, info) {
				return false
			}
			if sel, ok := x.(*ast.SelectorExpr); ok {
				if k := w.fieldCall(sel, info); k != "" {
					out = append(out, k)
				}
			}
			if id, ok := x.(*ast.Ident); ok {
				if obj := info.Uses[id]; obj != nil {
					if k := w.keyOf(obj); k != "" {
						out = append(out, k)
					}
				}
			}
			return true
		})
		return out
	}
	visit = func(key string) {
		if seen[key] || w.skipped(key) {
			return
		}
		seen[key] = true
		f := w.funcs[key]
		if f == nil || f.decl.Body == nil {
			return
		}
		stop := w.fset.Position(f.decl.End()).Line-f.line+1 >= w.cfg.Lines
		if stop {
			res.Stops = append(res.Stops, Stop{Func: strings.TrimPrefix(key, w.cfg.Module+"/"), File: f.file, Line: f.line})
			res.Trace = append(res.Trace, f.file)
		}
		for _, k := range refs(f.decl.Body, f.info) {
			visit(k)
			if stop && res.Trace[len(res.Trace)-1] != f.file {
				res.Trace = append(res.Trace, f.file) // back in the caller
			}
		}
	}
	visit(w.cfg.Start)
	left := map[string]bool{}
	files := map[string]bool{}
	for i, s := range res.Stops {
		files[s.File] = true
		if i > 0 && s.File != res.Stops[i-1].File {
			left[res.Stops[i-1].File] = true
			if left[s.File] {
				res.Returns = append(res.Returns, fmt.Sprintf("%s (stop %d: %s)", s.File, i+1, s.Func))
			}
		}
	}
	res.Files = len(files)
	res.TraceReturns = returns(res.Trace)
	return res, nil
}

// fieldCall is the function Calls names for the field sel reads, if any.
func (w *world) fieldCall(sel *ast.SelectorExpr, info *types.Info) string {
	s, ok := info.Selections[sel]
	if !ok || s.Kind() != types.FieldVal {
		return ""
	}
	rt := s.Recv()
	if p, ok := rt.(*types.Pointer); ok {
		rt = p.Elem()
	}
	named, ok := rt.(*types.Named)
	if !ok || named.Obj().Pkg() == nil {
		return ""
	}
	return w.cfg.Calls[named.Obj().Pkg().Path()+"."+named.Obj().Name()+"."+sel.Sel.Name]
}

// otherVerb reports whether n is a branch of a verb other than the one
// followed: a case clause, a key-value element or a composite literal whose
// constant string is another verb's name.
func (w *world) otherVerb(n ast.Node, info *types.Info) bool {
	names := func(exprs ...ast.Expr) []string {
		var out []string
		for _, e := range exprs {
			if tv, ok := info.Types[e]; ok && tv.Value != nil && tv.Value.Kind() == constant.String {
				if s := constant.StringVal(tv.Value); w.verbs[s] {
					out = append(out, s)
				}
			}
		}
		return out
	}
	other := func(vs []string) bool { return len(vs) > 0 && !slices.Contains(vs, w.cfg.Verb) }
	switch x := n.(type) {
	case *ast.CaseClause:
		return other(names(x.List...))
	case *ast.KeyValueExpr:
		return other(names(x.Key))
	case *ast.CompositeLit:
		var vals []ast.Expr
		for _, e := range x.Elts {
			if kv, ok := e.(*ast.KeyValueExpr); ok {
				vals = append(vals, kv.Value)
			}
		}
		return other(names(vals...))
	}
	return false
}

// String prints the walk: one line a stop, marking the returns.
func (r *Walk) String() string {
	var b strings.Builder
	for i, s := range r.Stops {
		fmt.Fprintf(&b, "%3d %-40s %s\n", i+1, fmt.Sprintf("%s:%d", s.File, s.Line), s.Func)
	}
	fmt.Fprintf(&b, "%d stops in %d files; %d returns to a file left between stops, %d counting the returns to callers\n", len(r.Stops), r.Files, len(r.Returns), r.TraceReturns)
	return b.String()
}
