package usage

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
)

// answerTransport answers every request with one status and body, and
// records the requests' methods.
type answerTransport struct {
	status  int
	body    string
	methods []string
	form    string
}

func (a *answerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	a.methods = append(a.methods, r.Method)
	if r.Body != nil {
		b, _ := io.ReadAll(r.Body)
		a.form = string(b)
	} else {
		a.form = r.URL.RawQuery
	}
	status := a.status
	if r.Method == http.MethodPost && status == 0 {
		status = http.StatusMethodNotAllowed
	} else if status == 0 {
		status = http.StatusOK
	}
	return &http.Response{
		StatusCode: status, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{"Content-Type": {"application/json"}}, Body: io.NopCloser(strings.NewReader(a.body)), Request: r,
	}, nil
}

// TestQueryRangeMatchesClient: queryRange decodes every answer as the
// client's QueryRange does: the same matrix, or an error that classify
// names alike (and the same *promv1.Error type where the client gives one).
func TestQueryRangeMatchesClient(t *testing.T) {
	const matrix = `{"status":"success","data":{"resultType":"matrix","result":[` +
		`{"metric":{"pod":"web-a","container":"app"},"values":[[1772359200,"0.2"],[1772359260.5,"NaN"],[1772359320.125,"+Inf"],[1772359380,"-1e-3"]]},` +
		`{"metric":{},"values":[]},{"metric":{"pod":"b"},"values":null}]},"warnings":["w"]}`
	r := promv1.Range{Start: time.Unix(1772359200, 0), End: time.Unix(1772359380, 0), Step: time.Minute}
	for _, tc := range []struct {
		name   string
		status int
		body   string
		ok     bool
	}{
		{"matrix", 200, matrix, true},
		{"matrix with spaces", 200, strings.ReplaceAll(strings.ReplaceAll(matrix, ",", " , "), "[", "[ "), true},
		{"empty", 200, `{"status":"success","data":{"resultType":"matrix","result":[]}}`, true},
		{"vector", 200, `{"status":"success","data":{"resultType":"vector","result":[]}}`, false},
		{"no data", 200, `{"status":"success"}`, false},
		{"error in a 200", 200, `{"status":"error","errorType":"execution","error":"boom"}`, false},
		{"bad data", 400, `{"status":"error","errorType":"bad_data","error":"parse error"}`, false},
		{"too many samples", 422, `{"status":"error","errorType":"execution","error":"too many samples"}`, false},
		{"422 without a body", 422, ``, false},
		{"success with 422", 422, `{"status":"success","data":{"resultType":"matrix","result":[]}}`, false},
		{"query timeout", 503, `{"status":"error","errorType":"timeout","error":"query timed out"}`, false},
		{"server error", 500, `oops`, false},
		{"not found", 404, `404 page not found`, false},
		{"not JSON", 200, `<html>`, false},
		{"a value not quoted", 200, `{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[[1,2]]}]}}`, false},
		{"a value not a number", 200, `{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[[1,"x"]]}]}}`, false},
		{"a pair too long", 200, `{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[[1,"2",3]]}]}}`, false},
		{"a time as a string", 200, `{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[["1","2"]]}]}}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			tr := &answerTransport{status: tc.status, body: tc.body}
			c, err := api.NewClient(api.Config{Address: "http://prometheus.test", RoundTripper: tr})
			if err != nil {
				t.Fatal(err)
			}
			want, _, _, wantErr := promv1.NewAPI(c).QueryRange(ctx, "up", r, promv1.WithTimeout(time.Second))
			wantForm := tr.form
			got, gotErr := queryRange(ctx, c, "up", r, time.Second)
			if tr.form != wantForm {
				t.Errorf("request %q, the client's %q", tr.form, wantForm)
			}
			if tc.ok {
				if gotErr != nil || wantErr != nil {
					t.Fatalf("errors %v (the client's %v), want none", gotErr, wantErr)
				}
				if !reflect.DeepEqual(normalise(got), normalise(want.(model.Matrix))) {
					t.Errorf("matrix\n%v\nthe client's\n%v", got, want)
				}
				return
			}
			if gotErr == nil {
				t.Fatalf("no error (the client's: %v)", wantErr)
			}
			if wantErr == nil {
				// The client accepts it, but as no matrix (ranged refuses it).
				if _, isMatrix := want.(model.Matrix); isMatrix {
					t.Fatalf("error %v, but the client read a matrix", gotErr)
				}
			}
			if g, w := classify(gotErr), classify(orType(wantErr, want)); !sameKind(g, w) {
				t.Errorf("classified as %v, the client's as %v", g, w)
			}
			var ge, we *promv1.Error
			if errors.As(wantErr, &we) && we.Type != promv1.ErrBadResponse {
				if !errors.As(gotErr, &ge) || ge.Type != we.Type || ge.Msg != we.Msg || ge.Detail != we.Detail {
					t.Errorf("error %#v, the client's %#v", gotErr, wantErr)
				}
			}
		})
	}
	t.Run("falls back to GET", func(t *testing.T) {
		tr := &answerTransport{body: matrix} // POST answered 405
		c, err := api.NewClient(api.Config{Address: "http://prometheus.test", RoundTripper: tr})
		if err != nil {
			t.Fatal(err)
		}
		m, err := queryRange(context.Background(), c, "up", r, 0)
		if err != nil || len(m) != 3 || !reflect.DeepEqual(tr.methods, []string{"POST", "GET"}) {
			t.Errorf("matrix of %d series, %v, methods %v: want 3 series by POST then GET", len(m), err, tr.methods)
		}
	})
}

// orType turns the client's accepted answer of another type into the
// error ranged gives it.
func orType(err error, v model.Value) error {
	if err != nil {
		return err
	}
	return errResultType{typeOf(v)}
}

func sameKind(a, b error) bool {
	for _, k := range []error{ErrPrometheusTimeout, ErrPrometheusRefused, ErrPrometheusUnavailable} {
		if errors.Is(a, k) != errors.Is(b, k) {
			return false
		}
	}
	return true
}

// normalise makes empty and nil value slices alike, and NaN comparable.
func normalise(m model.Matrix) []string {
	var out []string
	for _, s := range m {
		var b bytes.Buffer
		b.WriteString(s.Metric.String())
		for _, p := range s.Values {
			b.WriteString(" " + p.String())
		}
		out = append(out, b.String())
	}
	return out
}

func BenchmarkDecodeRangeAnswer(b *testing.B) {
	var body strings.Builder
	body.WriteString(`{"status":"success","data":{"resultType":"matrix","result":[`)
	for s := range 10 {
		if s > 0 {
			body.WriteString(",")
		}
		body.WriteString(`{"metric":{"pod":"web-` + string(rune('a'+s)) + `","container":"app","namespace":"shop"},"values":[`)
		for i := range 10080 {
			if i > 0 {
				body.WriteString(",")
			}
			body.WriteString(`[` + strconv.Itoa(1772359200+60*i) + `,"0.123456789"]`)
		}
		body.WriteString("]}")
	}
	body.WriteString("]}}")
	data := []byte(body.String())
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := decodeRangeAnswer(200, data); err != nil {
			b.Fatal(err)
		}
	}
}
