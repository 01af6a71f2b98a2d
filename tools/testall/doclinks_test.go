package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/stretchr/testify/require"
)

// docPackage is what the doc links of a package may name: its own
// identifiers, and its imports by the name it gives them.
type docPackage struct {
	path    string              // import path
	names   map[string]bool     // package-level identifiers
	members map[string][]string // a type's methods and fields
	imports map[string]string   // local name → import path
}

// Every doc link of the repository's Go files ([Name], [Type.Method],
// [pkg.Name]) names something that exists: a renamed method or a moved
// option leaves no link to nothing behind. Links into packages outside
// the repository are trusted; those into its own packages are checked
// against them.
func TestEveryDocLinkNamesWhatExists(t *testing.T) {
	root := filepath.Join("..", "..")
	pkgs := docPackages(t, root)
	byPath := map[string]*docPackage{}
	for _, p := range pkgs {
		byPath[p.path] = p
	}
	link := regexp.MustCompile(`\[\*?([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)\]`)
	var broken []string
	for dir, p := range pkgs {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		require.NoError(t, err)
		for _, file := range files {
			if strings.HasSuffix(file, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.ParseComments|parser.SkipObjectResolution)
			require.NoError(t, err)
			for _, group := range f.Comments {
				for _, m := range link.FindAllStringSubmatch(group.Text(), -1) {
					if !resolves(m[1], p, byPath) {
						broken = append(broken, file+": ["+m[1]+"]")
					}
				}
			}
		}
	}
	require.Empty(t, broken, "doc links that name nothing")
}

// resolves reports whether the doc link name resolves from package p.
func resolves(name string, p *docPackage, byPath map[string]*docPackage) bool {
	parts := strings.Split(name, ".")
	if p.names[parts[0]] {
		return len(parts) == 1 || len(parts) == 2 && slices.Contains(p.members[parts[0]], parts[1])
	}
	path, imported := p.imports[parts[0]]
	switch {
	case !imported && len(parts) == 1 && !unicode.IsUpper(rune(parts[0][0])):
		return true // text, not a link: a[k], [like]
	case !imported && len(parts) == 1:
		return builtin[parts[0]]
	case !imported:
		return !unicode.IsUpper(rune(parts[0][0])) // a package by its path: [encoding.TextMarshaler]
	}
	other, ours := byPath[path]
	switch {
	case !ours:
		return true // outside the repository
	case len(parts) == 1:
		return true // the package itself
	case !other.names[parts[1]]:
		return false
	}
	return len(parts) == 2 || len(parts) == 3 && slices.Contains(other.members[parts[1]], parts[2])
}

// builtin are the predeclared names a link may name.
var builtin = map[string]bool{"error": true, "any": true, "nil": true, "string": true, "int": true, "bool": true, "comparable": true}

// docPackages reads every package of the repository (every module), by
// directory: its identifiers and imports, from its non-test files.
func docPackages(t *testing.T, root string) map[string]*docPackage {
	t.Helper()
	modules := repoModules(t, root) // directory → module path
	pkgs := map[string]*docPackage{}
	err := filepath.WalkDir(root, func(dir string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		if name := d.Name(); dir != root && (name == "testdata" || strings.HasPrefix(name, ".")) {
			return filepath.SkipDir
		}
		p := readDocPackage(t, dir, importPath(dir, modules))
		if p != nil {
			pkgs[dir] = p
		}
		return nil
	})
	require.NoError(t, err)
	return pkgs
}

// importPath is dir's import path: its module's, and the way down.
func importPath(dir string, modules map[string]string) string {
	for d := dir; ; d = filepath.Dir(d) {
		if mod, ok := modules[d]; ok {
			rel, _ := filepath.Rel(d, dir)
			if rel == "." {
				return mod
			}
			return mod + "/" + filepath.ToSlash(rel)
		}
		if filepath.Dir(d) == d {
			return ""
		}
	}
}

// readDocPackage reads the non-test files of dir; nil when it has none.
func readDocPackage(t *testing.T, dir, path string) *docPackage {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	require.NoError(t, err)
	p := &docPackage{path: path, names: map[string]bool{}, members: map[string][]string{}, imports: map[string]string{}}
	read := false
	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.SkipObjectResolution)
		require.NoError(t, err)
		read = true
		for _, imp := range f.Imports {
			ipath, _ := strconv.Unquote(imp.Path.Value)
			local := ipath[strings.LastIndex(ipath, "/")+1:]
			if imp.Name != nil {
				local = imp.Name.Name
			}
			p.imports[local] = ipath
		}
		for _, decl := range f.Decls {
			p.add(decl)
		}
	}
	if !read {
		return nil
	}
	return p
}

// add records what decl declares.
func (p *docPackage) add(decl ast.Decl) {
	switch decl := decl.(type) {
	case *ast.FuncDecl:
		if decl.Recv == nil {
			p.names[decl.Name.Name] = true
			return
		}
		recv := decl.Recv.List[0].Type
		for {
			switch r := recv.(type) {
			case *ast.StarExpr:
				recv = r.X
				continue
			case *ast.IndexExpr:
				recv = r.X
				continue
			case *ast.IndexListExpr:
				recv = r.X
				continue
			case *ast.Ident:
				p.members[r.Name] = append(p.members[r.Name], decl.Name.Name)
			}
			break
		}
	case *ast.GenDecl:
		for _, spec := range decl.Specs {
			switch spec := spec.(type) {
			case *ast.TypeSpec:
				p.names[spec.Name.Name] = true
				p.addFields(spec)
			case *ast.ValueSpec:
				for _, n := range spec.Names {
					p.names[n.Name] = true
				}
			}
		}
	}
}

// addFields records the fields (and embedded types) of a struct type,
// and the methods of an interface.
func (p *docPackage) addFields(spec *ast.TypeSpec) {
	var fields *ast.FieldList
	switch typ := spec.Type.(type) {
	case *ast.StructType:
		fields = typ.Fields
	case *ast.InterfaceType:
		fields = typ.Methods
	default:
		return
	}
	for _, field := range fields.List {
		for _, n := range field.Names {
			p.members[spec.Name.Name] = append(p.members[spec.Name.Name], n.Name)
		}
		if len(field.Names) == 0 {
			embedded := field.Type
			if star, ok := embedded.(*ast.StarExpr); ok {
				embedded = star.X
			}
			if sel, ok := embedded.(*ast.SelectorExpr); ok {
				embedded = sel.Sel
			}
			if id, ok := embedded.(*ast.Ident); ok {
				p.members[spec.Name.Name] = append(p.members[spec.Name.Name], id.Name)
			}
		}
	}
}
