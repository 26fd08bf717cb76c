package wire

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/aware-k8s/aware/proto/aware/rlagent/v1"
)

const mi = 1 << 20

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// validRequest is a RecommendRequest that FromRecommend accepts.
func validRequest() *pb.RecommendRequest {
	return &pb.RecommendRequest{
		Workload: &pb.WorkloadRef{Namespace: "shop", Name: "web", Uid: "uid-web", TargetKind: "Deployment"},
		Observation: &pb.Observation{
			Time:     timestamppb.New(t0),
			Window:   durationpb.New(time.Minute),
			Replicas: 3, ReadyReplicas: 3,
			Containers: []*pb.ContainerObservation{{
				Name:     "app",
				Requests: &pb.Resources{CpuCores: 1, MemoryBytes: 512 * mi},
				Usage:    &pb.Resources{CpuCores: 0.9, MemoryBytes: 470 * mi},
				Peak:     &pb.Resources{CpuCores: 0.95, MemoryBytes: 480 * mi},
			}},
			RequestRate: 100, Latency: &pb.Latency{P50Seconds: 0.02, P95Seconds: 0.05, P99Seconds: 0.08},
			SloSeconds: 0.2, Samples: 6,
		},
		Constraints: &pb.Constraints{MinReplicas: 1, MaxReplicas: 10},
		DefaultRecommendation: &pb.Recommendation{Replicas: 3, Containers: []*pb.ContainerRecommendation{{
			Name: "app", Target: &pb.Resources{CpuCores: 1, MemoryBytes: 512 * mi},
		}}},
		Config: &pb.Config{Mode: pb.RLMode_RL_MODE_ON, Alpha: 0.5, Gates: &pb.Gates{Window: 2, EpisodeSteps: 1}},
	}
}

// checkConverted asserts the invariant of conversion: either the request is
// rejected as InvalidArgument with every violation naming a field, or the
// result passes the domain's own validation. (That the agent encodes an
// accepted request to a finite state is checked on the server's side,
// which links the agent.)
func checkConverted(t *testing.T, in Recommend, err error) {
	t.Helper()
	if err != nil {
		var inv *InvalidRequestError
		if !errors.Is(err, ErrInvalidArgument) || !errors.As(err, &inv) || len(inv.Violations) == 0 {
			t.Fatalf("rejection is not a field-level InvalidArgument: %v", err)
		}
		for _, v := range inv.Violations {
			if v.Field == "" || v.Description == "" {
				t.Fatalf("violation without field or description: %+v", v)
			}
		}
		return
	}
	for _, v := range []struct {
		what string
		err  error
	}{
		{"observation", in.Observation.Validate()}, {"constraints", in.Constraints.Validate()},
		{"default", in.Default.Validate()}, {"config", in.Config.Validate()},
	} {
		if v.err != nil {
			t.Fatalf("accepted request has an invalid %s: %v", v.what, v.err)
		}
	}
	if len(in.Observation.Containers) == 0 {
		t.Fatal("accepted an observation without containers")
	}
}

// seeds are the requests FuzzFromRecommendRequest starts from: a valid
// one, an empty one, and valid ones with one field broken.
func seeds() []*pb.RecommendRequest {
	seeds := []*pb.RecommendRequest{validRequest(), {}}
	for _, mutate := range []func(*pb.RecommendRequest){
		func(r *pb.RecommendRequest) { r.Observation.RequestRate = math.NaN() },
		func(r *pb.RecommendRequest) { r.Observation.Latency.P95Seconds = math.Inf(1) },
		func(r *pb.RecommendRequest) { r.Observation.Containers[0].Usage.CpuCores = math.Inf(-1) },
		func(r *pb.RecommendRequest) { r.Observation.Containers[0].Requests.MemoryBytes = -1 },
		func(r *pb.RecommendRequest) { r.Observation.Containers = nil },
		func(r *pb.RecommendRequest) { r.DefaultRecommendation.Containers = nil },
		func(r *pb.RecommendRequest) { r.Constraints = nil },
		func(r *pb.RecommendRequest) { r.Config.Gates = nil },
		func(r *pb.RecommendRequest) { r.Observation.StartupDelay = durationpb.New(-time.Second) },
	} {
		r := validRequest()
		mutate(r)
		seeds = append(seeds, r)
	}
	return seeds
}

// FuzzFromRecommendRequest feeds arbitrary wire bytes through the
// conversion.
func FuzzFromRecommendRequest(f *testing.F) {
	for _, s := range seeds() {
		b, err := proto.Marshal(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var r pb.RecommendRequest
		if err := proto.Unmarshal(data, &r); err != nil {
			return
		}
		in, err := FromRecommend(&r)
		checkConverted(t, in, err)
	})
}

// FuzzObservationNumbers fuzzes the numbers of an otherwise valid request
// and checks that exactly the finite, non-negative ones are accepted.
func FuzzObservationNumbers(f *testing.F) {
	f.Add(1.0, 512.0*mi, 100.0, 0.05, int32(3), uint8(1))
	f.Add(math.NaN(), 1.0, 1.0, 1.0, int32(1), uint8(1))
	f.Add(1.0, math.Inf(1), 1.0, 1.0, int32(1), uint8(1))
	f.Add(1.0, 1.0, math.Inf(-1), 1.0, int32(1), uint8(1))
	f.Add(1.0, 1.0, 1.0, -0.5, int32(1), uint8(1))
	f.Add(1.0, 1.0, 1.0, 1.0, int32(-1), uint8(1))
	f.Add(1.0, 1.0, 1.0, 1.0, int32(1), uint8(0))
	f.Add(0.0, 0.0, 0.0, 0.0, int32(0), uint8(4))
	f.Fuzz(func(t *testing.T, cpu, mem, rate, p95 float64, replicas int32, containers uint8) {
		r := validRequest()
		r.Observation.Containers = nil
		for i := range int(containers % 8) {
			r.Observation.Containers = append(r.Observation.Containers, &pb.ContainerObservation{
				Name:     string(rune('a' + i)),
				Requests: &pb.Resources{CpuCores: cpu, MemoryBytes: mem},
				Usage:    &pb.Resources{CpuCores: cpu / 2, MemoryBytes: mem / 2},
			})
		}
		r.Observation.RequestRate, r.Observation.Latency.P95Seconds, r.Observation.Replicas = rate, p95, replicas
		in, err := FromRecommend(r)
		checkConverted(t, in, err)
		ok := func(x float64) bool { return x >= 0 && !math.IsInf(x, 0) }
		want := ok(rate) && ok(p95) && replicas >= 0 && containers%8 > 0 && ok(cpu) && ok(mem)
		if (err == nil) != want {
			t.Fatalf("cpu=%v mem=%v rate=%v p95=%v replicas=%d containers=%d: err=%v, want accepted=%v", cpu, mem, rate, p95, replicas, containers%8, err, want)
		}
	})
}

// TestStartupDelay: the pods' start-up delay reaches the observation, and a
// negative or malformed one is refused naming the field.
func TestStartupDelay(t *testing.T) {
	for _, tc := range []struct {
		name    string
		d       *durationpb.Duration
		want    time.Duration
		wantErr string
	}{
		{"unset", nil, 0, ""},
		{"20 s", durationpb.New(20 * time.Second), 20 * time.Second, ""},
		{"negative", durationpb.New(-time.Second), 0, "observation.startup_delay: must be >= 0"},
		{"malformed", &durationpb.Duration{Seconds: 1, Nanos: -1}, 0, "observation.startup_delay"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := validRequest()
			r.Observation.StartupDelay = tc.d
			in, err := FromRecommend(r)
			checkConverted(t, in, err)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("err = %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("err = %v, want one naming %q", err, tc.wantErr)
			case err == nil && in.Observation.StartupDelay != tc.want:
				t.Fatalf("start-up delay %v, want %v", in.Observation.StartupDelay, tc.want)
			}
		})
	}
}

func BenchmarkFromRecommend(b *testing.B) {
	r := validRequest()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := FromRecommend(r); err != nil {
			b.Fatal(err)
		}
	}
}

func TestPathString(t *testing.T) {
	obs := Root("observation")
	ctr := obs.Elem("containers", 2)
	cons := Root("constraints")
	cc := cons.Elem("containers", 0)
	a := Root("a")
	b := a.Dot("b")
	c := b.Dot("c")
	d := c.Dot("d")
	e := d.Dot("e")
	f := e.Dot("f")
	g := f.Dot("g")
	deep := g.Dot("h")
	for _, tc := range []struct {
		name string
		p    Path
		want string
	}{
		{name: "root", p: Root("workload"), want: "workload"},
		{name: "nested field", p: ctr.Dot("usage"), want: "observation.containers[2].usage"},
		{name: "index zero", p: cc.Elem("controlled_resources", 1), want: "constraints.containers[0].controlled_resources[1]"},
		{name: "deeper than any message", p: deep, want: "a.b.c.d.e.f.g.h"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.p.String(); got != tc.want {
				t.Fatalf("path %q, want %q", got, tc.want)
			}
		})
	}
}

// TestDuplicateContainers checks duplicate names are found whether the
// names are scanned (few containers) or put in a set (many).
func TestDuplicateContainers(t *testing.T) {
	for _, tc := range []struct {
		name       string
		containers int
		dupOf      int // index of the container the last one repeats; -1 none
		unnamed    bool
		want       []string
	}{
		{name: "few, no duplicate", containers: 3, dupOf: -1},
		{name: "few, duplicate", containers: 3, dupOf: 1, want: []string{"observation.containers[3].name"}},
		{name: "many, no duplicate", containers: maxScannedContainers + 5, dupOf: -1},
		{name: "many, duplicate", containers: maxScannedContainers + 5, dupOf: 2, want: []string{fmt.Sprintf("observation.containers[%d].name", maxScannedContainers+5)}},
		{name: "unnamed are not duplicates", containers: 2, dupOf: 0, unnamed: true, want: []string{"observation.containers[0].name", "observation.containers[2].name"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := validRequest()
			tmpl := r.Observation.Containers[0]
			r.Observation.Containers = nil
			for i := range tc.containers {
				c := proto.Clone(tmpl).(*pb.ContainerObservation)
				c.Name = fmt.Sprintf("c%d", i)
				r.Observation.Containers = append(r.Observation.Containers, c)
			}
			if tc.dupOf >= 0 {
				c := proto.Clone(tmpl).(*pb.ContainerObservation)
				c.Name = r.Observation.Containers[tc.dupOf].Name
				r.Observation.Containers = append(r.Observation.Containers, c)
				if tc.unnamed {
					r.Observation.Containers[tc.dupOf].Name, c.Name = "", ""
				}
			}
			_, err := FromRecommend(r)
			var got []string
			var inv *InvalidRequestError
			if errors.As(err, &inv) {
				for _, v := range inv.Violations {
					if strings.HasPrefix(v.Field, "observation.containers") {
						got = append(got, v.Field)
					}
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("violations on containers %v, want %v (%v)", got, tc.want, err)
			}
		})
	}
}
