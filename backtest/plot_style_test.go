package backtest

import (
	"image/color"
	"strings"
	"testing"
)

// TestPlotColours checks that a policy keeps its colour and glyph under any spelling, that the
// compared policies have distinct colours and that no policy is drawn in the overload's red.
func TestPlotColours(t *testing.T) {
	names := []string{"hpa", "apa", "debi", "budget", OraclePolicy, "holtwinters-hpa", "evt-holtwinters-hpa", "holtwinters-debi", "seasonal-naive-hpa", "lstm-hpa", "evt-lstm-hpa"}
	seen := map[color.NRGBA]string{}
	for _, n := range names {
		c := policyColor(n)
		if c != policyColor(strings.ToUpper(n)) || policyGlyph(n) != policyGlyph(strings.ToUpper(n)) {
			t.Errorf("%s: colour or glyph depends on case", n)
		}
		if c.R > 0xc0 && c.G < 0x50 && c.B < 0x50 {
			t.Errorf("%s: red %v is the overload's colour", n, c)
		}
		if _, known := knownColors[n]; known {
			if other, dup := seen[c]; dup {
				t.Errorf("%s and %s share colour %v", n, other, c)
			}
			seen[c] = n
		}
	}
}
