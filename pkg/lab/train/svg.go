package train

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
)

// WriteCurveSVG plots the reward curve: each episode's mean reward (dots,
// grey while bootstrapping, blue online) and a moving average over
// windowEpisodes (line). The output is a pure function of the episodes.
func WriteCurveSVG(out io.Writer, episodes []Episode, windowEpisodes int) error {
	if len(episodes) == 0 {
		return fmt.Errorf("reward curve: no episodes")
	}
	windowEpisodes = max(windowEpisodes, 1)
	w := bufio.NewWriter(out)
	const width, height = 760, 420
	const x0, y0, pw, ph = 70.0, 40.0, 640.0, 320.0
	// The y axis spans the episodes above the 2nd percentile: a rare
	// disastrous episode (an OOM storm scores -1) would flatten the trend;
	// such dots are drawn on the bottom edge.
	rewards := make([]float64, len(episodes))
	for i, e := range episodes {
		rewards[i] = e.MeanReward
	}
	slices.Sort(rewards)
	ymin, ymax := rewards[len(rewards)/50], rewards[len(rewards)-1]
	ymin, ymax = math.Floor(ymin*10)/10, math.Ceil(ymax*10)/10
	if ymax <= ymin {
		ymax = ymin + 0.1
	}
	n := float64(max(len(episodes)-1, 1))
	px := func(i int) float64 { return x0 + float64(i)/n*pw }
	py := func(v float64) float64 { return y0 + ph - (math.Max(v, ymin)-ymin)/(ymax-ymin)*ph }
	f := func(x float64) string { return strconv.FormatFloat(math.Round(x*10)/10, 'f', -1, 64) }

	fmt.Fprintf(w, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif">`+"\n", width, height, width, height)
	fmt.Fprintln(w, `<rect width="100%" height="100%" fill="white"/>`)
	fmt.Fprintf(w, `<rect x="%s" y="%s" width="%s" height="%s" fill="none" stroke="#444"/>`+"\n", f(x0), f(y0), f(pw), f(ph))
	for k := 0; k <= 4; k++ {
		v := ymin + (ymax-ymin)*float64(k)/4
		fmt.Fprintf(w, `<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="#ddd"/>`+"\n", f(x0), f(py(v)), f(x0+pw), f(py(v)))
		fmt.Fprintf(w, `<text x="%s" y="%s" font-size="11" text-anchor="end">%s</text>`+"\n", f(x0-4), f(py(v)+4), strconv.FormatFloat(v, 'f', 2, 64))
	}
	step := 0
	for _, m := range []int{1, 2, 5} {
		for mag := 1; mag <= 1_000_000_000; mag *= 10 {
			if s := m * mag; float64(s)*5 >= n && (step == 0 || s < step) {
				step = s
			}
		}
	}
	for i := 0; float64(i) <= n; i += step {
		fmt.Fprintf(w, `<text x="%s" y="%s" font-size="11" text-anchor="middle">%d</text>`+"\n", f(px(i)), f(y0+ph+14), i)
	}
	fmt.Fprintln(w, `<text x="70" y="30" font-size="13" font-weight="bold">Reward per episode (dots; grey: the default acts while bootstrapping) and moving average</text>`)
	fmt.Fprintf(w, `<text x="%s" y="%s" font-size="12" text-anchor="middle">episode</text>`+"\n", f(x0+pw/2), f(y0+ph+32))
	fmt.Fprintf(w, `<text transform="translate(26,%s) rotate(-90)" font-size="12" text-anchor="middle">mean reward per window</text>`+"\n", f(y0+ph/2))
	for i, e := range episodes {
		c := "#1f77b4"
		if e.Phase == PhaseBootstrap {
			c = "#999"
		}
		fmt.Fprintf(w, `<circle cx="%s" cy="%s" r="2" fill="%s" fill-opacity="0.5"/>`+"\n", f(px(i)), f(py(e.MeanReward)), c)
	}
	fmt.Fprint(w, `<polyline fill="none" stroke="#d62728" stroke-width="2" points="`)
	var sum float64
	for i, e := range episodes {
		sum += e.MeanReward
		if i >= windowEpisodes {
			sum -= episodes[i-windowEpisodes].MeanReward
		}
		fmt.Fprintf(w, "%s,%s ", f(px(i)), f(py(sum/float64(min(i+1, windowEpisodes)))))
	}
	fmt.Fprintln(w, `"/>`)
	fmt.Fprintln(w, "</svg>")
	return w.Flush()
}
