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

{{/* The probe's exec command (readiness and liveness). */}}
{{- define "eni-ipam.probeCommand" -}}
{{- $cmd := concat .Values.probe.command (list "--socket" (include "eni-ipam.socket" .) "--timeout" (toString .Values.probe.timeoutMs)) -}}
{{- toJson $cmd -}}
{{- end -}}
