package web

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/fom-go/fom/statistics"
)

// svgChart is a chart's geometry, computed here and drawn by the chart
// template: no client-side charting.
type svgChart struct {
	Title  string
	W, H   float64
	Axes   []axis
	Bars   []bar
	Lines  []line
	Labels []label
}

type axis struct{ X1, Y1, X2, Y2 float64 }
type bar struct {
	X, Y, W, H float64
	Class      string
	Title      string
}
type line struct{ Points, Class string }
type label struct {
	X, Y   float64
	Text   string
	Anchor string
}

func (c svgChart) viewBox() string { return fmt.Sprintf("0 0 %g %g", c.W, c.H) }

func f(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }

const (
	chartW, chartH         = 640.0, 220.0
	padL, padR, padT, padB = 48.0, 56.0, 14.0, 30.0
	plotW, plotH           = chartW - padL - padR, chartH - padT - padB
)

// niceMax rounds v up to 1, 2 or 5 times a power of ten.
func niceMax(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := 1.0
	for p*10 <= v {
		p *= 10
	}
	for p > v {
		p /= 10
	}
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

func fmtCount(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

// dayChart draws tasks per day as bars (not-successful part in red) with
// the average and p95 cost as lines on a second axis. A day without tasks
// is a gap in the lines and a dashed mark, not a cost of 0 ms.
func dayChart(days []statistics.DaySummary) svgChart {
	c := svgChart{Title: "tasks and cost per day", W: chartW, H: chartH}
	maxCount, maxCost := 0.0, time.Duration(0)
	for _, d := range days {
		maxCount = max(maxCount, float64(d.Count))
		maxCost = max(maxCost, d.P95, d.Avg)
	}
	yMax := niceMax(maxCount)
	costMax := niceMax(float64(maxCost) / float64(time.Millisecond))
	base := padT + plotH
	c.Axes = append(c.Axes, axis{padL, base, padL + plotW, base}, axis{padL, padT, padL, base}, axis{padL + plotW, padT, padL + plotW, base})
	for _, frac := range []float64{0, 0.5, 1} {
		y := base - frac*plotH
		c.Labels = append(c.Labels,
			label{padL - 6, y + 4, fmtCount(frac * yMax), "end"},
			label{padL + plotW + 6, y + 4, fmtMs(frac * costMax), "start"})
	}
	n := float64(max(len(days), 1))
	slot := plotW / n
	var avg, p95 []string
	flush := func() { // ends the lines' current segment
		if len(avg) == 1 { // one day alone: a dot (round caps) rather than nothing
			avg, p95 = append(avg, avg[0]), append(p95, p95[0])
		}
		if len(avg) > 0 {
			c.Lines = append(c.Lines, line{strings.Join(avg, " "), "line-avg"}, line{strings.Join(p95, " "), "line-p95"})
		}
		avg, p95 = nil, nil
	}
	for i, d := range days {
		x := padL + float64(i)*slot
		bw := slot * 0.6
		h := float64(d.Count) / yMax * plotH
		bad := float64(d.Count-d.ByStatus["success"]) / yMax * plotH
		title := fmt.Sprintf("%s: %d tasks, %d not successful, avg %s, p95 %s", d.Day.Format(time.DateOnly), d.Count, d.Count-d.ByStatus["success"], shortDur(d.Avg), shortDur(d.P95))
		c.Bars = append(c.Bars, bar{x + slot*0.2, base - h, bw, h, "bar", title})
		if bad > 0 {
			c.Bars = append(c.Bars, bar{x + slot*0.2, base - bad, bw, bad, "bar-bad", title})
		}
		cx := x + slot/2
		c.Labels = append(c.Labels, label{cx, base + 16, d.Day.Format("01-02"), "middle"})
		if d.Count == 0 {
			flush()
			c.Bars = append(c.Bars, bar{x + slot*0.2, base - 3, bw, 3, "bar-none", d.Day.Format(time.DateOnly) + ": no tasks ran"})
			continue
		}
		avg = append(avg, f(cx)+","+f(base-ms(d.Avg)/costMax*plotH))
		p95 = append(p95, f(cx)+","+f(base-ms(d.P95)/costMax*plotH))
	}
	flush()
	return c
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func fmtMs(v float64) string {
	if v >= 1000 {
		return strconv.FormatFloat(v/1000, 'f', -1, 64) + "s"
	}
	return strconv.FormatFloat(v, 'f', -1, 64) + "ms"
}

// bucketChart draws how many tasks fell in each cost bucket.
func bucketChart(labels [6]string, counts [6]int64) svgChart {
	c := svgChart{Title: "tasks per cost bucket", W: chartW, H: chartH}
	maxC := 0.0
	for _, n := range counts {
		maxC = max(maxC, float64(n))
	}
	yMax := niceMax(maxC)
	base := padT + plotH
	c.Axes = append(c.Axes, axis{padL, base, padL + plotW, base}, axis{padL, padT, padL, base})
	for _, frac := range []float64{0, 0.5, 1} {
		c.Labels = append(c.Labels, label{padL - 6, base - frac*plotH + 4, fmtCount(frac * yMax), "end"})
	}
	slot := plotW / 6
	for i, n := range counts {
		x := padL + float64(i)*slot
		h := float64(n) / yMax * plotH
		c.Bars = append(c.Bars, bar{x + slot*0.15, base - h, slot * 0.7, h, "bar", fmt.Sprintf("%s: %d tasks", labels[i], n)})
		c.Labels = append(c.Labels, label{x + slot/2, base + 16, labels[i], "middle"}, label{x + slot/2, base - h - 4, strconv.FormatInt(n, 10), "middle"})
	}
	return c
}

// shortDur prints a duration for people: 1.5s, 230ms, 12µs.
func shortDur(d time.Duration) string {
	switch {
	case d == 0:
		return "0"
	case d < time.Millisecond:
		return d.Round(time.Microsecond).String()
	case d < time.Second:
		return d.Round(100 * time.Microsecond).String()
	case d < time.Minute:
		return d.Round(10 * time.Millisecond).String()
	}
	return statistics.ShortDuration(d.Round(time.Second))
}
