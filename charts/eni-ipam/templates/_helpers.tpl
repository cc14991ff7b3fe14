{{/* Name of the chart's objects: fullnameOverride, else nameOverride, else "eni-ipam". */}}
{{- define "eni-ipam.fullname" -}}
{{- default (default .Chart.Name .Values.nameOverride) .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "eni-ipam.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Labels the pods are selected by (never change across upgrades). */}}
{{- define "eni-ipam.selectorLabels" -}}
app.kubernetes.io/name: {{ include "eni-ipam.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "eni-ipam.labels" -}}
{{ include "eni-ipam.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "eni-ipam.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "eni-ipam.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* repository@digest when a digest is set, else repository:tag (tag defaults to appVersion). */}}
{{- define "eni-ipam.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{/* ipamd's gRPC socket, inside the container and on the host alike. */}}
{{- define "eni-ipam.socket" -}}
{{- printf "%s/ipamd.sock" (trimSuffix "/" .Values.runDir) -}}
{{- end -}}

{{/* The probe's exec command (readiness: ipamd serves pods). */}}
{{- define "eni-ipam.probeCommand" -}}
{{- $cmd := concat .Values.probe.command (list "--socket" (include "eni-ipam.socket" .) "--timeout" (toString .Values.probe.timeoutMs)) -}}
{{- toJson $cmd -}}
{{- end -}}

{{/* The liveness probe's command: ipamd answers at all (serving, draining, or standing by beside aws-node or another owner). */}}
{{- define "eni-ipam.livenessCommand" -}}
{{- $cmd := concat .Values.probe.command (list "--socket" (include "eni-ipam.socket" .) "--service" "eniipam.v1.Liveness" "--timeout" (toString .Values.probe.timeoutMs)) -}}
{{- toJson $cmd -}}
{{- end -}}

{{/*
Name of the chart's cluster-wide objects (ClusterRole, ClusterRoleBinding): the documented
release (eni-ipam in kube-system) keeps the plain full name; any other release carries its
namespace and name, so a second release never collides with the first.
*/}}
{{- define "eni-ipam.clusterName" -}}
{{- $full := include "eni-ipam.fullname" . -}}
{{- if and (eq .Release.Name $full) (eq .Release.Namespace "kube-system") -}}
{{- $full -}}
{{- else -}}
{{- printf "%s-%s-%s" $full .Release.Namespace .Release.Name | trunc 253 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/*
An env value as ipamd reads it: text as written; a YAML number (helm reads every one as a
float64) in plain digits, as toJson writes it (4294967295, not 4.294967295e+09); a boolean
as true/false. values.schema.json types each value for this text (ipamd/config-chart-types.ts).
*/}}
{{- define "eni-ipam.envText" -}}
{{- if kindIs "float64" . -}}
{{- toJson . -}}
{{- else -}}
{{- toString . -}}
{{- end -}}
{{- end -}}

{{/*
ADDITIONAL_ENI_TAGS (env, and extraEnv entries with a value) as ipamd checks it at start
(ipamd/config-fields-more.ts tagMap), refused with the same words: a JSON object of at
most 47 string values, keys of 1 to 128 and values of at most 256 characters, no reserved
key. The schema can only say "text".
*/}}
{{- define "eni-ipam.checkTags" -}}
{{- include "eni-ipam.checkTagsValue" (list "env.ADDITIONAL_ENI_TAGS" (get .Values.env "ADDITIONAL_ENI_TAGS")) -}}
{{- range $i, $e := .Values.extraEnv -}}
{{- if and (eq (get $e "name") "ADDITIONAL_ENI_TAGS") (hasKey $e "value") -}}
{{- include "eni-ipam.checkTagsValue" (list (printf "extraEnv[%d] ADDITIONAL_ENI_TAGS" $i) (get $e "value")) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* One ADDITIONAL_ENI_TAGS value: (list <where> <value>). */}}
{{- define "eni-ipam.checkTagsValue" -}}
{{- $raw := include "eni-ipam.envText" (index . 1) | trim -}}
{{- if $raw -}}
{{- $v := printf "%s=%s is invalid:" (index . 0) (toJson $raw) -}}
{{- $want := "expected a JSON object of string tag values such as {\"team\":\"net\"}" -}}
{{- /* fromJson cannot tell a parse error from a tag named "Error": parse it as the one element of an array. */ -}}
{{- $parsed := fromJsonArray (printf "[%s]" $raw) -}}
{{- if or (ne (len $parsed) 1) (kindIs "string" (first $parsed)) -}}
{{- fail (printf "%s not JSON; %s" $v $want) -}}
{{- end -}}
{{- $tags := first $parsed -}}
{{- if not (kindIs "map" $tags) -}}
{{- fail (printf "%s not a JSON object; %s" $v $want) -}}
{{- end -}}
{{- if gt (len $tags) 47 -}}
{{- fail (printf "%s %d tags; at most 47 (EC2 allows 50 per ENI and ipamd sets 3)" $v (len $tags)) -}}
{{- end -}}
{{- range $k := keys $tags | sortAlpha -}}
{{- $val := get $tags $k -}}
{{- if not (kindIs "string" $val) -}}
{{- fail (printf "%s tag %s has a non-string value; %s" $v (toJson $k) $want) -}}
{{- end -}}
{{- $kn := len (splitList "" $k) -}}
{{- if or (lt $kn 1) (gt $kn 128) -}}
{{- fail (printf "%s tag key %s must be 1 to 128 characters" $v (toJson $k)) -}}
{{- end -}}
{{- if gt (len (splitList "" $val)) 256 -}}
{{- fail (printf "%s tag %s value must be at most 256 characters" $v (toJson $k)) -}}
{{- end -}}
{{- if or (regexMatch "^(?i)(aws:|node\\.k8s\\.amazonaws\\.com/)" $k) (regexMatch "^(?i)cluster\\.k8s\\.amazonaws\\.com/name$" $k) -}}
{{- fail (printf "%s tag key %s is reserved (aws:*, node.k8s.amazonaws.com/*, cluster.k8s.amazonaws.com/name)" $v (toJson $k)) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
