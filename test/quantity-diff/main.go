// Command quantity-diff compares gpu-memory-guard's quantity parser (lib/core/quantity.c, run
// through quantity_driver) with k8s.io/apimachinery's resource.ParseQuantity, on apimachinery's
// own test strings (apimachinery-table.txt) and on a seeded random set of grammar-aware strings.
//
// For each string both answers are put in a class (docs/quantity-differential.md): agreement
// (both refuse, or both accept with the same bytes), one of the allowed differences, or a
// disagreement. Any disagreement makes the exit status 1.
//
//	quantity-diff -driver build/quantity_driver -table apimachinery-table.txt [-n 100000] [-seed N]
//	quantity-diff -extract $GOMODCACHE/k8s.io/apimachinery@v0.33.13/pkg/api/resource/quantity_test.go
package main

import (
	"bufio"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"math"
	"math/big"
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
)

// The C parser's cap (QUANTITY_MAX_LEN in lib/core/quantity.h).
const cMaxLen = 64

// An exponent this close to the int32 limits, or past them, meets apimachinery's int32 exponent
// and scale arithmetic (suffix.go: int32(parsed); quantity.go: scale -= len(denom), infScale()).
const int32Margin = 64

// Classes of a comparison. The first two are agreements, the next five allowed differences.
const (
	clsAgreeRefuse = "agree: both refuse"
	clsAgreeBytes  = "agree: same bytes"
	clsLengthCap   = "allowed: longer than 64 characters (C refuses)"
	clsNegative    = "allowed: negative (C refuses, Go accepts)"
	clsAboveRange  = "allowed: 16Ei or more (C refuses, Go accepts)"
	clsBinaryCap   = "allowed: binary suffix above 2^63-1 (Go caps at 2^63-1, C exact or refuses)"
	clsNoDigits    = "allowed: number without a digit (Go reads 0, C refuses)"
	clsExpWrap     = "allowed: exponent beyond int32 (Go wraps, C exact)"
	clsDisagree    = "DISAGREE"
)

var classOrder = []string{clsAgreeRefuse, clsAgreeBytes, clsLengthCap, clsNegative, clsAboveRange,
	clsBinaryCap, clsNoDigits, clsExpWrap, clsDisagree}

// cAnswer is one line of quantity_driver: "ok <bytes>" or "err <CODE>".
type cAnswer struct {
	ok    bool
	bytes uint64
	code  string // EINVAL ENEGATIVE ERANGE EEMPTY ETOOLONG
}

func (c cAnswer) String() string {
	if c.ok {
		return fmt.Sprintf("ok %d", c.bytes)
	}
	return "err " + c.code
}

// goAnswer is apimachinery's: an error, or the value rounded up to whole bytes.
type goAnswer struct {
	err      error
	sign     int      // of the parsed value
	bytes    *big.Int // ceil(|value|) when it is below 2^64 (huge is false)
	huge     bool     // ceil(|value|) >= 2^64
	binary   bool     // Format == BinarySI
	value    int64    // Quantity.Value(), for the self-check
	valueErr string   // Value() differs from the exact ceil (should never happen)
}

func (g goAnswer) String() string {
	switch {
	case g.err != nil:
		return "err " + g.err.Error()
	case g.huge:
		return fmt.Sprintf("ok sign %d, 2^64 or more", g.sign)
	default:
		return fmt.Sprintf("ok sign %d, ceil %s", g.sign, g.bytes)
	}
}

var (
	two64       = new(big.Int).Lsh(big.NewInt(1), 64)
	maxInt64Big = big.NewInt(math.MaxInt64)
)

// parseGo runs ParseQuantity and rounds its value up to whole bytes without ever building a
// number of more than about 30 digits (a parsed quantity may carry a scale of -2^31).
func parseGo(s string) goAnswer {
	if os.Getenv("QD_TRACE") != "" {
		fmt.Fprintf(os.Stderr, "parse %q\n", s)
	}
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return goAnswer{err: err}
	}
	a := goAnswer{binary: q.Format == resource.BinarySI, value: q.Value()}
	d := q.AsDec()
	a.sign = d.Sign()
	u := new(big.Int).Abs(d.UnscaledBig())
	a.bytes = new(big.Int)
	if a.sign == 0 {
		return a
	}
	scale := int64(d.Scale())                   // value = u * 10^-scale
	intDigits := int64(len(u.String())) - scale // digits left of the point
	switch {
	case intDigits > 21:
		a.huge = true
	case intDigits <= 0:
		a.bytes.SetInt64(1) // 0 < |value| < 1
	case scale <= 0:
		a.bytes.Mul(u, new(big.Int).Exp(big.NewInt(10), big.NewInt(-scale), nil))
	default:
		p := new(big.Int).Exp(big.NewInt(10), big.NewInt(scale), nil)
		quo, rem := new(big.Int).QuoRem(u, p, new(big.Int))
		if rem.Sign() != 0 {
			quo.Add(quo, big.NewInt(1))
		}
		a.bytes = quo
	}
	if !a.huge && a.bytes.Cmp(two64) >= 0 {
		a.huge = true
	}
	if a.sign > 0 && !a.huge && a.bytes.Cmp(maxInt64Big) <= 0 && a.value != a.bytes.Int64() {
		a.valueErr = fmt.Sprintf("Quantity.Value() %d, exact ceil %s", a.value, a.bytes)
	}
	return a
}

var (
	mantissaRe = regexp.MustCompile(`^[+-]?([0-9]*)(?:\.([0-9]*))?`)
	exponentRe = regexp.MustCompile(`^[eE]([+-]?[0-9]+)$`)
)

// split returns the number's digits (integer and fraction, joined), whether it is negative,
// and the rest of the string (the suffix, or junk).
func split(s string) (digits string, negative bool, rest string) {
	m := mantissaRe.FindStringSubmatchIndex(s)
	digits = s[m[2]:m[3]]
	if m[4] >= 0 {
		digits += s[m[4]:m[5]]
	}
	return digits, strings.HasPrefix(s, "-"), s[m[1]:]
}

// wrappedExponent reports a decimal exponent that fits in int64 (else both refuse) but not
// comfortably in int32, and its sign.
func wrappedExponent(rest string) (bool, int) {
	m := exponentRe.FindStringSubmatch(rest)
	if m == nil {
		return false, 0
	}
	e, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil {
		return false, 0
	}
	if e > math.MaxInt32-int32Margin || e < math.MinInt32+int32Margin {
		if e > 0 {
			return true, 1
		}
		return true, -1
	}
	return false, 0
}

// exactForWrapped is what the C parser must answer for a string whose exponent Go wraps: the
// true value is 0, or at least 10^(2^31-64) (out of range), or below 1 (one byte).
func exactForWrapped(s string, expSign int) cAnswer {
	digits, negative, _ := split(s)
	switch {
	case digits == "":
		return cAnswer{code: "EINVAL"}
	case strings.Trim(digits, "0") == "":
		return cAnswer{ok: true}
	case negative:
		return cAnswer{code: "ENEGATIVE"}
	case expSign > 0:
		return cAnswer{code: "ERANGE"}
	default:
		return cAnswer{ok: true, bytes: 1}
	}
}

// classify puts one comparison in a class; the string says why when it is a disagreement.
func classify(s string, g goAnswer, c cAnswer) (string, string) {
	if g.valueErr != "" {
		return clsDisagree, "apimachinery disagrees with itself: " + g.valueErr
	}
	if len(s) > cMaxLen {
		if !c.ok && c.code == "ETOOLONG" {
			return clsLengthCap, ""
		}
		return clsDisagree, "C should refuse a string over its length cap"
	}
	if !c.ok && c.code == "ETOOLONG" {
		return clsDisagree, "C refused a string within its length cap as too long"
	}
	if g.err != nil {
		if !c.ok && (c.code == "EINVAL" || c.code == "EEMPTY") {
			return clsAgreeRefuse, ""
		}
		return clsDisagree, "Go refuses the grammar, C does not"
	}
	if g.sign >= 0 && !g.huge && c.ok && new(big.Int).SetUint64(c.bytes).Cmp(g.bytes) == 0 {
		return clsAgreeBytes, ""
	}
	if wrapped, expSign := wrappedExponent(splitRest(s)); wrapped {
		if c == exactForWrapped(s, expSign) {
			return clsExpWrap, ""
		}
		return clsDisagree, "exponent beyond int32: C is not exact"
	}
	digits, _, _ := split(s)
	switch {
	case g.sign == 0 && digits == "" && !c.ok && c.code == "EINVAL":
		return clsNoDigits, ""
	case g.sign < 0 && !c.ok && c.code == "ENEGATIVE":
		return clsNegative, ""
	case g.sign > 0 && g.huge && !c.ok && c.code == "ERANGE" && !g.binary:
		return clsAboveRange, ""
	case g.sign > 0 && g.binary && !g.huge && g.bytes.Cmp(maxInt64Big) == 0 &&
		((c.ok && c.bytes > math.MaxInt64) || (!c.ok && c.code == "ERANGE")):
		return clsBinaryCap, ""
	}
	return clsDisagree, "different answers"
}

func splitRest(s string) string {
	_, _, rest := split(s)
	return rest
}

// runDriver feeds every string to quantity_driver, one a line, and reads its answers.
func runDriver(driver string, inputs []string) ([]cAnswer, error) {
	cmd := exec.Command(driver)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		w := bufio.NewWriter(stdin)
		for _, s := range inputs {
			w.WriteString(s)
			w.WriteByte('\n')
		}
		w.Flush()
		stdin.Close()
	}()
	var out []cAnswer
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) == 2 && f[0] == "ok":
			v, err := strconv.ParseUint(f[1], 10, 64)
			if err != nil {
				return nil, fmt.Errorf("driver line %d: %q", len(out)+1, sc.Text())
			}
			out = append(out, cAnswer{ok: true, bytes: v})
		case len(f) == 2 && f[0] == "err":
			out = append(out, cAnswer{code: f[1]})
		default:
			return nil, fmt.Errorf("driver line %d: %q", len(out)+1, sc.Text())
		}
	}
	if err := cmd.Wait(); err != nil {
		return nil, fmt.Errorf("driver: %v", err)
	}
	if len(out) != len(inputs) {
		return nil, fmt.Errorf("driver answered %d of %d strings", len(out), len(inputs))
	}
	return out, nil
}

// readTable reads apimachinery-table.txt: one Go-quoted string a line, '#' comments.
func readTable(path string) ([]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []string
	for i, line := range strings.Split(string(data), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		s, err := strconv.Unquote(line)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %v", path, i+1, err)
		}
		out = append(out, s)
	}
	return out, nil
}

// quantityShaped keeps the string literals of quantity_test.go that are quantities or near
// misses (test inputs), not messages or format strings.
var quantityShaped = regexp.MustCompile(`^[0-9A-Za-z.+\- ]{0,40}$`)

// extract prints, as apimachinery-table.txt, every quantity-shaped string literal of
// apimachinery's quantity_test.go, with the "-" and "+" forms its TestQuantityParse also tries.
func extract(path string) error {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, 0)
	if err != nil {
		return err
	}
	seen := map[string]bool{}
	var out []string
	add := func(s string) {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	ast.Inspect(f, func(n ast.Node) bool {
		if _, ok := n.(*ast.ImportSpec); ok {
			return false
		}
		lit, ok := n.(*ast.BasicLit)
		if !ok || lit.Kind != token.STRING {
			return true
		}
		s, err := strconv.Unquote(lit.Value)
		if err != nil || !quantityShaped.MatchString(s) {
			return true
		}
		if !strings.ContainsAny(s, "0123456789") && len(s) > 6 {
			return true // a word or a message ("Non-Numeric" stays: it is short of digits, not long)
		}
		add(s)
		if s != "" && s[0] != '-' && s[0] != '+' {
			add("-" + s)
			add("+" + s)
		}
		return true
	})
	fmt.Println("# Test strings of k8s.io/apimachinery v0.33.13, pkg/api/resource/quantity_test.go")
	fmt.Println("# (Copyright 2014 The Kubernetes Authors, Apache License 2.0): every quantity-shaped")
	fmt.Println("# string literal of that file, in its order, each also with \"-\" and \"+\" in front as its")
	fmt.Println("# TestQuantityParse tries. Made by: quantity-diff -extract <that file>. One Go-quoted")
	fmt.Println("# string a line.")
	for _, s := range out {
		fmt.Println(strconv.Quote(s))
	}
	return nil
}

type tally struct {
	counts   map[string]int
	examples map[string][]string
}

func compare(name string, driver string, inputs []string, show int, t *tally) error {
	answers, err := runDriver(driver, inputs)
	if err != nil {
		return err
	}
	local := map[string]int{}
	for i, s := range inputs {
		g := parseGo(s)
		cls, why := classify(s, g, answers[i])
		local[cls]++
		t.counts[cls]++
		limit := show
		if cls == clsDisagree {
			limit = 50
		}
		if len(t.examples[cls]) < limit {
			t.examples[cls] = append(t.examples[cls],
				fmt.Sprintf("%s %q: Go %s; C %s %s", name, s, g, answers[i], why))
		}
	}
	fmt.Printf("%s: %d strings\n", name, len(inputs))
	for _, cls := range classOrder {
		if local[cls] > 0 {
			fmt.Printf("  %7d  %s\n", local[cls], cls)
		}
	}
	return nil
}

func main() {
	driver := flag.String("driver", "", "path of quantity_driver (the C parser)")
	table := flag.String("table", "", "apimachinery-table.txt")
	n := flag.Int("n", 100000, "random strings")
	seed := flag.Uint64("seed", 20261130, "seed of the random strings")
	show := flag.Int("show", 3, "examples printed per class (all disagreements up to 50)")
	extractFrom := flag.String("extract", "", "print the table made from this quantity_test.go, then exit")
	flag.Parse()

	if *extractFrom != "" {
		if err := extract(*extractFrom); err != nil {
			fmt.Fprintln(os.Stderr, "quantity-diff:", err)
			os.Exit(2)
		}
		return
	}
	if *driver == "" || *table == "" {
		fmt.Fprintln(os.Stderr, "quantity-diff: -driver and -table are needed")
		os.Exit(2)
	}
	t := &tally{counts: map[string]int{}, examples: map[string][]string{}}
	tableInputs, err := readTable(*table)
	if err == nil {
		err = compare("apimachinery table", *driver, tableInputs, *show, t)
	}
	if err == nil {
		err = compare(fmt.Sprintf("random (seed %d)", *seed), *driver, generate(*seed, *n), *show, t)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "quantity-diff:", err)
		os.Exit(2)
	}
	classes := make([]string, 0, len(t.examples))
	for cls := range t.examples {
		classes = append(classes, cls)
	}
	sort.Slice(classes, func(i, j int) bool { return rank(classes[i]) < rank(classes[j]) })
	fmt.Println("examples:")
	for _, cls := range classes {
		for _, e := range t.examples[cls] {
			fmt.Printf("  [%s] %s\n", cls, e)
		}
	}
	total := 0
	for _, c := range t.counts {
		total += c
	}
	fmt.Printf("quantity-diff: %d strings, %d agree, %d allowed differences, %d disagreements\n",
		total, t.counts[clsAgreeRefuse]+t.counts[clsAgreeBytes],
		total-t.counts[clsAgreeRefuse]-t.counts[clsAgreeBytes]-t.counts[clsDisagree],
		t.counts[clsDisagree])
	if t.counts[clsDisagree] > 0 {
		os.Exit(1)
	}
}

func rank(cls string) int {
	for i, c := range classOrder {
		if c == cls {
			return i
		}
	}
	return len(classOrder)
}
