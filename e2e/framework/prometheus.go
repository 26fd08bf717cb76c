package framework

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// PromSample is one series of an instant-vector result.
type PromSample struct {
	Metric map[string]string
	Time   time.Time
	Value  float64
}

// PromQuery runs an instant query against the testbed's Prometheus HTTP API
// and returns the vector it yields. Other result types are an error: the
// tests only ask for vectors.
func (tb *Testbed) PromQuery(ctx context.Context, query string) ([]PromSample, error) {
	u := tb.PrometheusURL + "/api/v1/query?" + url.Values{"query": {query}}.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("prometheus query %q: %w", query, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, err
	}
	var out struct {
		Status    string `json:"status"`
		ErrorType string `json:"errorType"`
		Error     string `json:"error"`
		Data      struct {
			ResultType string `json:"resultType"`
			Result     []struct {
				Metric map[string]string `json:"metric"`
				Value  [2]any            `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &out); err != nil {
		return nil, fmt.Errorf("prometheus query %q: HTTP %d, undecodable body: %w", query, resp.StatusCode, err)
	}
	if out.Status != "success" {
		return nil, fmt.Errorf("prometheus query %q: %s: %s", query, out.ErrorType, out.Error)
	}
	if out.Data.ResultType != "vector" {
		return nil, fmt.Errorf("prometheus query %q: result type %q, want vector", query, out.Data.ResultType)
	}
	samples := make([]PromSample, 0, len(out.Data.Result))
	for _, r := range out.Data.Result {
		ts, ok := r.Value[0].(float64)
		vs, ok2 := r.Value[1].(string)
		if !ok || !ok2 {
			return nil, fmt.Errorf("prometheus query %q: malformed sample %v", query, r.Value)
		}
		v, err := strconv.ParseFloat(vs, 64)
		if err != nil {
			return nil, fmt.Errorf("prometheus query %q: sample value %q: %w", query, vs, err)
		}
		sec := int64(ts)
		samples = append(samples, PromSample{
			Metric: r.Metric,
			Time:   time.Unix(sec, int64((ts-float64(sec))*1e9)),
			Value:  v,
		})
	}
	return samples, nil
}
