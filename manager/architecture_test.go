package manager

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// repoRoot is the repository's root, seen from this package's directory.
const repoRoot = ".."

// TestArchitectureMap: docs/architecture.md's tables name every top-level
// folder of the repository (as `name/`, in the Folders table) and every
// component the manager registers (as its Name, in the Manager components
// table), and name nothing that is gone.
func TestArchitectureMap(t *testing.T) {
	doc := filepath.Join(repoRoot, "docs", "architecture.md")
	data, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	folders := firstCells(string(data), "## Folders")
	components := firstCells(string(data), "## Manager components")
	if len(folders) == 0 || len(components) == 0 {
		t.Fatalf("docs/architecture.md: want the tables under \"## Folders\" and \"## Manager components\" (first column `name/` and `component`), found %d and %d rows", len(folders), len(components))
	}

	entries, err := os.ReadDir(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	dirs := map[string]bool{}
	for _, e := range entries {
		name := e.Name()
		if !e.IsDir() || strings.HasPrefix(name, ".") || name == "bin" {
			continue
		}
		dirs[name+"/"] = true
		if !folders[name+"/"] {
			t.Errorf("top-level folder %s/ is missing from docs/architecture.md: add a row \"| `%s/` | what it is | status |\" to the table under \"## Folders\"", name, name)
		}
	}
	for f := range folders {
		if !dirs[f] {
			t.Errorf("docs/architecture.md's Folders table has a row for `%s`, which is not a top-level folder of the repository: remove or rename it", f)
		}
	}

	names := map[string]bool{}
	for _, c := range Components() {
		names[c.Name] = true
		if !components[c.Name] {
			t.Errorf("manager component %q (manager.Components) is missing from docs/architecture.md: add a row \"| `%s` | package | what it runs | clusterctl provider |\" to the table under \"## Manager components\"", c.Name, c.Name)
		}
	}
	for c := range components {
		if !names[c] {
			t.Errorf("docs/architecture.md's Manager components table has a row for %q, which manager.Components does not register: remove or rename it", c)
		}
	}
}

// firstCells returns the first column of the table under heading, each
// cell's text between its backquotes.
func firstCells(doc, heading string) map[string]bool {
	cells := map[string]bool{}
	in := false
	for _, line := range strings.Split(doc, "\n") {
		switch {
		case strings.HasPrefix(line, "#"):
			in = strings.TrimSpace(line) == heading
		case in && strings.HasPrefix(line, "|"):
			first := strings.TrimSpace(strings.Split(line, "|")[1])
			if strings.HasPrefix(first, "`") && strings.HasSuffix(first, "`") && len(first) > 2 {
				cells[strings.Trim(first, "`")] = true
			}
		}
	}
	return cells
}

// mdLink matches the target of a markdown link or image: ](target).
var mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// TestDocLinks: every relative link of README.md and docs/*.md names a
// file or folder of the repository (not outside it), and a #fragment
// into a markdown file names one of its headings.
func TestDocLinks(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, filepath.Join(repoRoot, "README.md"))
	root, err := filepath.Abs(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(repoRoot, file)
		for n, line := range outsideCode(string(data)) {
			for _, m := range mdLink.FindAllStringSubmatch(line, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				path, fragment, _ := strings.Cut(target, "#")
				dest := file
				if path != "" {
					dest = filepath.Join(filepath.Dir(file), path)
					abs, err := filepath.Abs(dest)
					if err != nil {
						t.Fatal(err)
					}
					if abs != root && !strings.HasPrefix(abs, root+string(filepath.Separator)) {
						t.Errorf("%s:%d: link %q leaves the repository: docs link only to files in it", rel, n+1, target)
						continue
					}
					if _, err := os.Stat(dest); err != nil {
						t.Errorf("%s:%d: link %q names no file of the repository: fix the path (relative to %s)", rel, n+1, target, filepath.Dir(rel))
						continue
					}
				}
				if fragment == "" || !strings.HasSuffix(dest, ".md") {
					continue
				}
				anchors, err := headingAnchors(dest)
				if err != nil {
					t.Fatal(err)
				}
				if !anchors[fragment] {
					t.Errorf("%s:%d: link %q names no heading of %s: fix the #fragment (GitHub's anchor of a heading)", rel, n+1, target, filepath.Base(dest))
				}
			}
		}
	}
}

// outsideCode returns doc's lines with those of fenced code blocks emptied,
// so that line numbers stay.
func outsideCode(doc string) []string {
	lines := strings.Split(doc, "\n")
	fenced := false
	for i, line := range lines {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			lines[i] = ""
			continue
		}
		if fenced {
			lines[i] = ""
		}
	}
	return lines
}

// headingAnchors returns the anchors GitHub gives the headings of a
// markdown file: lower case, punctuation other than - and _ dropped,
// spaces as -, and -1, -2, ... on repeats.
func headingAnchors(file string) (map[string]bool, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	anchors := map[string]bool{}
	seen := map[string]int{}
	for _, line := range outsideCode(string(data)) {
		if !strings.HasPrefix(line, "#") {
			continue
		}
		text := strings.TrimSpace(strings.TrimLeft(line, "#"))
		var b strings.Builder
		for _, r := range strings.ToLower(text) {
			switch {
			case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
				b.WriteRune(r)
			case r == ' ':
				b.WriteRune('-')
			}
		}
		a := b.String()
		if n := seen[a]; n > 0 {
			anchors[a+"-"+strconv.Itoa(n)] = true
		} else {
			anchors[a] = true
		}
		seen[a]++
	}
	return anchors, nil
}
