package e2e

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"unicode"

	"github.com/scrfs/scrfs/control"
	"github.com/scrfs/scrfs/layout"
	"github.com/scrfs/scrfs/prefix"
)

// The operator documentation must stay true to the binary: these tests
// compare docs/cli.md with what scrfs itself says (its help, its flags, its
// exit codes, its JSON types), check every scrfs command line written in the
// documents, every relative link, and the systemd unit.

const cliPath = "../docs/cli.md"

// operatorDocs are the documents whose scrfs command lines are checked.
var operatorDocs = []string{"../README.md", "../docs/guide.md", "../docs/cli.md", "../docs/slurm.md",
	"../docs/configuration.md", "../docs/systemd/scrfs@.service"}

// cliCommands returns the commands `scrfs help` lists, with the flags each
// accepts according to its own --help.
func cliCommands(t *testing.T) map[string][]string {
	t.Helper()
	out, err := exec.Command(scrfsBin, "help").Output()
	if err != nil {
		t.Fatalf("scrfs help: %v", err)
	}
	cmds := map[string][]string{}
	_, list, ok := strings.Cut(string(out), "Commands:\n")
	if !ok {
		t.Fatalf("scrfs help lists no commands:\n%s", out)
	}
	for _, l := range strings.Split(list, "\n") {
		f := strings.Fields(l)
		if len(f) < 2 || !strings.HasPrefix(l, "  ") {
			break
		}
		cmds[f[0]] = nil
	}
	flagLine := regexp.MustCompile(`(?m)^  -([\w-]+)`)
	for c := range cmds {
		var errb bytes.Buffer
		cmd := exec.Command(scrfsBin, c, "--help")
		cmd.Stderr = &errb
		// --help exits 0 or 2 by flag's convention; only its text matters.
		if err := cmd.Run(); err != nil && !errors.As(err, new(*exec.ExitError)) {
			t.Fatalf("scrfs %s --help: %v", c, err)
		}
		for _, m := range flagLine.FindAllStringSubmatch(errb.String(), -1) {
			cmds[c] = append(cmds[c], m[1])
		}
	}
	if len(cmds) < 8 {
		t.Fatalf("scrfs help lists %d commands", len(cmds))
	}
	cmds["help"] = nil // scrfs help itself
	return cmds
}

// section returns the text of doc under the heading that equals head, up
// to the next heading of the same or a higher level.
func section(t *testing.T, doc, head string) string {
	t.Helper()
	level := strings.Index(head, " ")
	i := strings.Index(doc, "\n"+head+"\n")
	if i < 0 {
		t.Errorf("docs/cli.md has no heading %q", head)
		return ""
	}
	rest := doc[i+len(head)+2:]
	for _, l := range strings.SplitAfter(rest, "\n") {
		if n := len(l) - len(strings.TrimLeft(l, "#")); n > 0 && n <= level && strings.HasPrefix(l[n:], " ") {
			return rest[:strings.Index(rest, l)]
		}
	}
	return rest
}

// TestCLIReference checks docs/cli.md against the binary: a section per
// command naming each of its flags, a row per exit code of
// cmd/scrfs/exitcodes.go, and every JSON field of the --json outputs.
func TestCLIReference(t *testing.T) {
	b, err := os.ReadFile(cliPath)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	for c, flags := range cliCommands(t) {
		if c == "help" {
			continue
		}
		sec := section(t, doc, "### scrfs "+c)
		for _, f := range flags {
			if !strings.Contains(sec, "`--"+f) {
				t.Errorf("docs/cli.md, scrfs %s: flag --%s is not documented", c, f)
			}
		}
	}

	// Exit codes, read from the source the binary is built from.
	src, err := os.ReadFile("../cmd/scrfs/exitcodes.go")
	if err != nil {
		t.Fatal(err)
	}
	codes := regexp.MustCompile(`(?m)^\s*exit\w+\s*=\s*(\d+)`).FindAllStringSubmatch(string(src), -1)
	table := section(t, doc, "## Exit codes")
	rows := regexp.MustCompile(`(?m)^\| (\d+) \|`).FindAllStringSubmatch(table, -1)
	if len(codes) == 0 || len(rows) != len(codes) {
		t.Errorf("exitcodes.go defines %d codes, docs/cli.md's table has %d rows", len(codes), len(rows))
	}
	for _, c := range codes {
		if !strings.Contains(table, "| "+c[1]+" |") {
			t.Errorf("exit code %s is not in docs/cli.md's table", c[1])
		}
	}

	// JSON fields, from the types the commands encode.
	for _, c := range []struct {
		head  string
		types []reflect.Type
		extra []string
	}{
		{"### status --json", []reflect.Type{reflect.TypeFor[control.Status]()}, nil},
		{"### list --json", []reflect.Type{reflect.TypeFor[prefix.Index]()}, nil},
		{"### layout --json", []reflect.Type{reflect.TypeFor[layout.Report]()}, []string{"self", "addrs", "source", "layout"}},
	} {
		sec := section(t, doc, c.head)
		names := c.extra
		for _, typ := range c.types {
			names = append(names, jsonNames(typ, map[reflect.Type]bool{})...)
		}
		for _, n := range names {
			if !regexp.MustCompile("[`.]" + regexp.QuoteMeta(n) + "[`\".\\[]").MatchString(sec) {
				t.Errorf("docs/cli.md, %s: field %q is not documented", c.head, n)
			}
		}
	}
}

// jsonNames returns the JSON field names of typ and of the structs it
// holds, recursively.
func jsonNames(typ reflect.Type, seen map[reflect.Type]bool) []string {
	for typ.Kind() == reflect.Pointer || typ.Kind() == reflect.Slice || typ.Kind() == reflect.Array {
		typ = typ.Elem()
	}
	if typ.Kind() != reflect.Struct || seen[typ] || typ.PkgPath() == "time" {
		return nil
	}
	seen[typ] = true
	var out []string
	for i := 0; i < typ.NumField(); i++ {
		f := typ.Field(i)
		tag := strings.Split(f.Tag.Get("json"), ",")[0]
		if f.Anonymous && tag == "" {
			out = append(out, jsonNames(f.Type, seen)...)
			continue
		}
		if tag == "-" || !f.IsExported() {
			continue
		}
		if tag == "" {
			tag = f.Name
		}
		out = append(out, tag)
		out = append(out, jsonNames(f.Type, seen)...)
	}
	return out
}

// TestDocCommandLines checks every `scrfs COMMAND --flag` written in the
// operator documents: the command exists and accepts the flag.
func TestDocCommandLines(t *testing.T) {
	cmds := cliCommands(t)
	invocation := regexp.MustCompile(`\bscrfs\s+([a-z]+)((?:[ \t]+(?:\\\n[ \t]*)?[^\s|;&)#` + "`" + `]+)*)`)
	n := 0
	for _, path := range operatorDocs {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range invocation.FindAllStringSubmatch(string(b), -1) {
			flags, known := cmds[m[1]]
			if !known {
				// Prose such as "scrfs mounts": only words that are
				// followed by flags must be commands.
				if strings.Contains(m[2], " --") {
					t.Errorf("%s: %q: no command %q", path, m[0], m[1])
				}
				continue
			}
			n++
			for _, tok := range strings.Fields(strings.ReplaceAll(m[2], "\\\n", " ")) {
				f := flagToken.FindStringSubmatch(tok)
				if f == nil {
					continue
				}
				if name := f[1]; name != "help" && name != "h" && !slices.Contains(flags, name) {
					t.Errorf("%s: %q: scrfs %s has no flag --%s", path, strings.TrimSpace(m[0]), m[1], name)
				}
			}
		}
	}
	if n < 20 {
		t.Errorf("found only %d scrfs command lines in the documents", n)
	}
}

// flagToken is a flag as written on a command line: -name, --name, --name=value.
var flagToken = regexp.MustCompile(`^--?([A-Za-z][\w-]*)`)

// TestDocLinks checks the relative links of the operator documents: the
// file exists and, with a #fragment, has a heading of that anchor.
func TestDocLinks(t *testing.T) {
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	for _, path := range []string{"../README.md", "../docs/guide.md", "../docs/cli.md", "../docs/slurm.md"} {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range link.FindAllStringSubmatch(string(b), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, frag, _ := strings.Cut(target, "#")
			dest := path
			if file != "" {
				dest = filepath.Join(filepath.Dir(path), file)
			}
			if _, err := os.Stat(dest); err != nil {
				t.Errorf("%s: link %s: %v", path, target, err)
				continue
			}
			if frag != "" && !anchors(t, dest)[frag] {
				t.Errorf("%s: link %s: %s has no heading #%s", path, target, dest, frag)
			}
		}
	}
}

// anchors returns the GitHub anchors of a Markdown file's headings.
func anchors(t *testing.T, path string) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	inCode := false
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "```") {
			inCode = !inCode
		}
		if inCode || !strings.HasPrefix(l, "#") {
			continue
		}
		title := strings.TrimSpace(strings.TrimLeft(l, "#"))
		var slug strings.Builder
		for _, r := range strings.ToLower(title) {
			switch {
			case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
				slug.WriteRune(r)
			case r == ' ':
				slug.WriteRune('-')
			}
		}
		out[slug.String()] = true
	}
	return out
}

// TestSystemdUnit verifies docs/systemd/scrfs@.service with
// systemd-analyze, as an instance for the current user and with the scrfs
// it names replaced by the one under test.
func TestSystemdUnit(t *testing.T) {
	analyze := requireTool(t, "systemd-analyze", "systemd")
	b, err := os.ReadFile("../docs/systemd/scrfs@.service")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte("/usr/local/bin/scrfs mount ")) {
		t.Fatal("the unit does not run /usr/local/bin/scrfs mount")
	}
	dir := t.TempDir()
	unit := filepath.Join(dir, "scrfs@"+currentUser()+".service")
	if err := os.WriteFile(unit, bytes.ReplaceAll(b, []byte("/usr/local/bin/scrfs"), []byte(scrfsBin)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(analyze, "verify", unit).CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
	// Its ExecStart, ExecStartPost and ExecStop lines are scrfs command
	// lines that TestDocCommandLines checks; they must all be there.
	var lines []string
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, "="); ok && strings.HasPrefix(k, "Exec") && strings.Contains(v, "scrfs ") {
			lines = append(lines, k)
		}
	}
	sort.Strings(lines)
	if strings.Join(lines, ",") != "ExecStart,ExecStartPost,ExecStop" {
		t.Errorf("scrfs commands of the unit: %v", lines)
	}
}

// TestCIRunsTheREADMECommand: .ci/run ends with exactly the test command
// README.md's "Test it" gives, so what CI passes is what a user runs.
func TestCIRunsTheREADMECommand(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	must(t, err)
	ci, err := os.ReadFile("../.ci/run")
	must(t, err)
	_, rest, ok := strings.Cut(string(readme), "## Test it\n\n```sh\n")
	if !ok {
		t.Fatal(`README.md has no "## Test it" section opening with a sh block`)
	}
	cmd, _, _ := strings.Cut(rest, "\n")
	lines := strings.Split(strings.TrimSpace(string(ci)), "\n")
	if last := lines[len(lines)-1]; last != cmd {
		t.Fatalf(".ci/run ends with %q; README.md's test command is %q", last, cmd)
	}
}
