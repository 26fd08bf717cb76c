package fusion

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/aware-k8s/aware/pkg/core/hpa"
)

// VariantHelp says what ParseVariant reads, for flag help.
const VariantHelp = `"" (the fused default), target=T (HPA target CPU utilisation T in (0, 1] instead of 0.7), limit-target=T (the same target as a fraction of the pods' CPU limit, so pods with limits above requests run above their requests), with the optional settings /hold=D (of the request again for the duration D after the pods were starved of CPU by their node) and /burst=R (of the request while the request rate's decayed peak is at least R times its decayed mean); either target takes /scale-up=P (the replica count may grow by P percent, or 4 pods, per 15 s instead of the HPA's default 100, where the autoscaler sets no scale-up behaviour) /floor=usage (the SLO's CPU floor sized for the usage a pod carries, not for the highest utilisation the horizontal loop tolerates) and /floor-band=both (a pod the SLO floor sized is resized once the floor moves 10% either way, not only up), e.g. limit-target=0.7/hold=24h/burst=3/scale-up=400, target=0.7/floor=usage, target=0.7/floor-band=both`

// ParseVariant reads a variant of the fused default, as the demo's
// "fused:SPEC" policies, a residual agent's anchor and the recommender name
// it: "" is the default, "target=T" sets the HPA target CPU utilisation,
// "limit-target=T" makes it a fraction of the CPU limit
// (Options.TargetOfLimit), with optional settings "/hold=D"
// (Options.PressureHold) and "/burst=R" (Options.BurstRatio), and either
// target with "/scale-up=P" (Options.ScaleUpPercent), "/floor=usage"
// (Options.UsageFloor) and "/floor-band=both" (Options.FloorBandBoth),
// each at most once, in any order.
// The options it returns are valid.
func ParseVariant(spec string) (Options, error) {
	if spec == "" {
		return Options{}, nil
	}
	bad := func(why string) (Options, error) {
		return Options{}, fmt.Errorf("fused variant %q: %s (want %s)", spec, why, VariantHelp)
	}
	key, rest, _ := strings.Cut(spec, "=")
	value, settings, withSettings := strings.Cut(rest, "/")
	var o Options
	switch key {
	case "target":
	case "limit-target":
		o.TargetOfLimit = true
	default:
		return bad("unknown setting " + strconv.Quote(key))
	}
	t, err := strconv.ParseFloat(value, 64)
	if err != nil || !(t > 0 && t <= 1) {
		return bad("the target CPU utilisation must be in (0, 1]")
	}
	o.HPA = hpa.PolicyOptions{TargetCPUUtilization: t}
	if withSettings {
		seen := map[string]bool{}
		for _, kv := range strings.Split(settings, "/") {
			k, v, _ := strings.Cut(kv, "=")
			if seen[k] {
				return bad(strconv.Quote(k) + " given twice")
			}
			seen[k] = true
			if (k == "hold" || k == "burst") && !o.TargetOfLimit {
				return bad("hold and burst apply only to limit-target")
			}
			switch k {
			case "scale-up":
				p, err := strconv.ParseInt(v, 10, 32)
				if err != nil || p < 1 {
					return bad("scale-up must be a whole percent >= 1, e.g. scale-up=400")
				}
				o.ScaleUpPercent = int32(p)
			case "hold":
				if o.PressureHold, err = time.ParseDuration(v); err != nil || o.PressureHold <= 0 {
					return bad("hold must be a positive duration, e.g. hold=24h")
				}
			case "floor":
				if v != "usage" {
					return bad("floor must be usage (the default's floor is named by leaving the setting out)")
				}
				o.UsageFloor = true
			case "floor-band":
				if v != "both" {
					return bad("floor-band must be both (the default's band, upwards only, is named by leaving the setting out)")
				}
				o.FloorBandBoth = true
			case "burst":
				if o.BurstRatio, err = strconv.ParseFloat(v, 64); err != nil || !(o.BurstRatio > 1) || math.IsInf(o.BurstRatio, 0) {
					return bad("burst must be a finite ratio > 1, e.g. burst=3")
				}
			default:
				return bad("unknown setting " + strconv.Quote(k) + " after the target (hold, burst, scale-up, floor or floor-band)")
			}
		}
	}
	if err := o.Validate(); err != nil {
		return bad(err.Error())
	}
	return o, nil
}

// SameVariant reports whether the specs a and b name the same default,
// however spelt: "" and "target=0.7" (the default target), or
// "limit-target=0.70/hold=24h" and "limit-target=0.7/hold=1440m" are each
// one default.
// Different specs are never the same when either does not parse.
func SameVariant(a, b string) bool {
	if a == b {
		return true
	}
	oa, err := ParseVariant(a)
	if err != nil {
		return false
	}
	ob, err := ParseVariant(b)
	if err != nil {
		return false
	}
	oa.HPA, ob.HPA = oa.HPA.WithDefaults(), ob.HPA.WithDefaults()
	return oa == ob
}
