// Package agentclient is the recommender's client of the RL agent contract
// (proto/aware/rlagent/v1): an Advisor that asks the agent for each
// workload's recommendation and reports its outcome, a circuit breaker, and
// the deadlines and breaker applied to every call. The conversions to and
// from the wire types live in proto/aware/rlagent/wire.
package agentclient
