// Command samedecisions compares two backtest JSON reports (debi backtest --format json) field by
// field and prints where they differ: the check that a change which should not change any
// decision (a reorganisation, a refactoring) did not. Timing fields, which differ from run to
// run, are left out; a field only one report has is listed, so that a new column or parameter
// shows (-new lists the fields a report may add without counting as a difference).
//
//	go run ./hack/samedecisions [-new zero_share,cold_overload] before.json after.json
//
// It exits 1 when the reports differ, 0 when they are the same, 2 on a bad argument or file.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
)

// timing are the fields that measure the run, not its decisions.
var timing = []string{"decide_seconds", "train_seconds", "ticks_per_second"}

func main() {
	newFields := flag.String("new", "", "comma-separated fields the second report may add (a new column or parameter)")
	most := flag.Int("most", 25, "the most differences printed")
	flag.Parse()
	if flag.NArg() != 2 {
		fmt.Fprintln(os.Stderr, "usage: samedecisions [-new f1,f2] before.json after.json")
		os.Exit(2)
	}
	var a, b any
	for i, dst := range []*any{&a, &b} {
		raw, err := os.ReadFile(flag.Arg(i))
		if err == nil {
			err = json.Unmarshal(raw, dst)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "samedecisions: %s: %v\n", flag.Arg(i), err)
			os.Exit(2)
		}
	}
	d := differ{added: strings.Split(*newFields, ",")}
	d.walk(a, b, "")
	for i, s := range d.out {
		if i == *most {
			fmt.Printf("… and %d more\n", len(d.out)-*most)
			break
		}
		fmt.Println(s)
	}
	if len(d.out) > 0 {
		fmt.Printf("%s and %s: %d differences\n", flag.Arg(0), flag.Arg(1), len(d.out))
		os.Exit(1)
	}
	fmt.Printf("%s and %s: the same decisions\n", flag.Arg(0), flag.Arg(1))
}

type differ struct {
	added []string
	out   []string
}

func (d *differ) walk(a, b any, path string) {
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok {
			d.out = append(d.out, fmt.Sprintf("%s: an object, then %T", path, b))
			return
		}
		keys := make([]string, 0, len(x)+len(y))
		for k := range x {
			keys = append(keys, k)
		}
		for k := range y {
			if _, ok := x[k]; !ok {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		for _, k := range keys {
			if slices.Contains(timing, k) {
				continue
			}
			va, inA := x[k]
			vb, inB := y[k]
			switch {
			case !inA && slices.Contains(d.added, k):
			case !inA:
				d.out = append(d.out, fmt.Sprintf("%s.%s: only in the second", path, k))
			case !inB:
				d.out = append(d.out, fmt.Sprintf("%s.%s: only in the first", path, k))
			default:
				d.walk(va, vb, path+"."+k)
			}
		}
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			d.out = append(d.out, fmt.Sprintf("%s: %d elements, then %v", path, len(x), lenOf(b)))
			return
		}
		for i := range x {
			d.walk(x[i], y[i], fmt.Sprintf("%s[%d]", path, i))
		}
	default:
		if fmt.Sprint(a) != fmt.Sprint(b) {
			d.out = append(d.out, fmt.Sprintf("%s: %.80v, then %.80v", path, a, b))
		}
	}
}

func lenOf(v any) string {
	if y, ok := v.([]any); ok {
		return fmt.Sprintf("%d elements", len(y))
	}
	return fmt.Sprintf("a %T", v)
}
