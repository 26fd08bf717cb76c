{{/* aware.image (list $ "BINARY"): REGISTRY/aware-BINARY:TAG, as make images names it. */}}
{{- define "aware.image" -}}
{{- $root := index . 0 -}}
{{- $repo := printf "aware-%s" (index . 1) -}}
{{- with $root.Values.image.registry }}{{ $repo = printf "%s/%s" (trimSuffix "/" .) $repo }}{{ end -}}
{{- printf "%s:%s" $repo ($root.Values.image.tag | default $root.Chart.AppVersion) -}}
{{- end }}

{{/* aware.agentEndpoint: where the recommender reaches the RL agent; empty means none. */}}
{{- define "aware.agentEndpoint" -}}
{{- if .Values.agentLink.endpoint -}}
{{- .Values.agentLink.endpoint -}}
{{- else if .Values.rlAgent.enabled -}}
{{- printf "aware-rl-agent.%s.svc:9090" .Values.namespace -}}
{{- end -}}
{{- end }}

{{/* aware.agentLinkArgs (list $ "PREFIX"): the --PREFIX* TLS flags of the agent link. */}}
{{- define "aware.agentLinkArgs" -}}
{{- $root := index . 0 -}}
{{- $p := index . 1 -}}
{{- $l := $root.Values.agentLink -}}
{{- if eq $l.mode "self-managed" -}}
- --{{ $p }}mode=self-managed
- --{{ $p }}secret-name={{ $l.secretName }}
{{- else if eq $l.mode "files" -}}
- --{{ $p }}mode=files
- --{{ $p }}cert-file=/etc/aware/rl-agent-tls/tls.crt
- --{{ $p }}key-file=/etc/aware/rl-agent-tls/tls.key
- --{{ $p }}ca-file=/etc/aware/rl-agent-tls/ca.crt
{{- else if eq $l.mode "plaintext" -}}
- --{{ $p }}mode=plaintext
{{- else -}}
{{- fail "agentLink.mode must be self-managed, files or plaintext" -}}
{{- end -}}
{{- end }}

{{/* aware.configData: the install parameters the recommender reads. */}}
{{- define "aware.configData" -}}
prometheus-address: {{ .Values.prometheusAddress | quote }}
{{- end }}

{{/* aware.configName: aware-config with a hash of its content, so a change rolls the recommender. */}}
{{- define "aware.configName" -}}
{{- printf "aware-config-%s" (include "aware.configData" . | sha256sum | trunc 10) -}}
{{- end }}

{{/* aware.ensembleArgs: the rl-agent's --ensemble-* flags from rlAgent.ensemble, validated as the agent validates them; empty for a learner. */}}
{{- define "aware.ensembleArgs" -}}
{{- $e := .Values.rlAgent.ensemble -}}
{{- $n := len $e.checkpoints -}}
{{- if not (or (kindIs "int" $e.quorum) (kindIs "int64" $e.quorum) (and (kindIs "float64" $e.quorum) (eq (floor $e.quorum) $e.quorum))) -}}
{{- fail (printf "rlAgent.ensemble.quorum must be a whole number, got %v" $e.quorum) -}}
{{- end -}}
{{- $q := int $e.quorum -}}
{{- if eq $n 0 -}}
{{- if ne $q 0 -}}
{{- fail (printf "rlAgent.ensemble.quorum=%d needs rlAgent.ensemble.checkpoints" $q) -}}
{{- end -}}
{{- else -}}
{{- if lt $n 2 -}}
{{- fail (printf "rlAgent.ensemble.checkpoints needs at least 2 checkpoints, got %d" $n) -}}
{{- end -}}
{{- if or (lt $q 0) (gt $q $n) -}}
{{- fail (printf "rlAgent.ensemble.quorum must be in [0, %d] (0: all %d members), got %d" $n $n $q) -}}
{{- end -}}
{{- $paths := list -}}
{{- range $e.checkpoints -}}
{{- if hasPrefix "/" . -}}
{{- $paths = append $paths . -}}
{{- else if not $e.volume -}}
{{- fail (printf "rlAgent.ensemble.checkpoints: %q is relative to rlAgent.ensemble.mountPath, but rlAgent.ensemble.volume names no volume to mount there (e.g. configMap: {name: aware-rl-agent-ensemble})" .) -}}
{{- else -}}
{{- $paths = append $paths (printf "%s/%s" (trimSuffix "/" $e.mountPath) .) -}}
{{- end -}}
{{- end -}}
- --ensemble-checkpoints={{ join "," $paths }}
- --ensemble-quorum={{ $q }}
{{- end -}}
{{- end }}
