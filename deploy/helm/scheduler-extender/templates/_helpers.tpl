{{/*
Names are fixed, as in deploy/ (kustomize): README snippets, the NetworkPolicy and the
extender's own defaults (extender/checks/permissions.py) name these objects.
*/}}

{{- define "se.chart" -}}
{{ .Chart.Name }}-{{ .Chart.Version | replace "+" "_" }}
{{- end }}

{{/* Labels of every object; "name" is the component (extender-webhook, ...). */}}
{{- define "se.labels" -}}
app.kubernetes.io/name: {{ .name }}
app.kubernetes.io/part-of: scheduler-extender
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
helm.sh/chart: {{ include "se.chart" .root }}
{{- end }}

{{/* The pod template's labels: deploy/'s, which the Services, PDBs and NetworkPolicy select. */}}
{{- define "se.podLabels" -}}
app.kubernetes.io/name: {{ .name }}
app.kubernetes.io/component: {{ .component }}
app.kubernetes.io/part-of: scheduler-extender
app.kubernetes.io/instance: {{ .root.Release.Name }}
{{- end }}

{{- define "se.image" -}}
{{- $tag := .Values.image.tag | default .Chart.AppVersion -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}:{{ $tag }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ $tag }}
{{- end }}
{{- end }}

{{/* The webhook Service's DNS name, which the serving certificate holds. */}}
{{- define "se.webhookHost" -}}
extender-webhook.{{ .Release.Namespace }}.svc
{{- end }}

{{- define "se.webhookScheme" -}}
{{- if .Values.webhook.tls.enabled }}https{{ else }}http{{ end -}}
{{- end }}

{{- define "se.webhookURL" -}}
{{- if .Values.kubeScheduler.extender.urlPrefix -}}
{{ .Values.kubeScheduler.extender.urlPrefix }}
{{- else -}}
{{ include "se.webhookScheme" . }}://{{ include "se.webhookHost" . }}:8888
{{- end }}
{{- end }}

{{/* The Secret the webhook serves with (tls.crt, tls.key, ca.crt). */}}
{{- define "se.serverSecret" -}}
{{ .Values.webhook.tls.existingSecret | default "extender-webhook-tls" }}
{{- end }}

{{/* The Secret callers use: ca.crt, and tls.crt/tls.key for mutual TLS. */}}
{{- define "se.clientSecret" -}}
{{- if .Values.webhook.tls.existingClientSecret -}}
{{ .Values.webhook.tls.existingClientSecret }}
{{- else if .Values.webhook.tls.existingSecret -}}
{{ .Values.webhook.tls.existingSecret }}
{{- else -}}
extender-kube-scheduler-client
{{- end }}
{{- end }}

{{/* schedulerNames whose pods the webhook's /bind accepts. */}}
{{- define "se.schedulerNames" -}}
{{- if .Values.webhook.schedulerNames -}}
{{ toJson .Values.webhook.schedulerNames }}
{{- else if .Values.kubeScheduler.enabled -}}
{{ toJson (list .Values.kubeScheduler.schedulerName) }}
{{- else -}}
{{ toJson (list "default-scheduler") }}
{{- end }}
{{- end }}

{{/* The policy files of the preset, or the ones given inline. */}}
{{- define "se.policyData" -}}
{{- $preset := dict "default" (list "files/policy-webhook.yaml" "files/policy.yaml")
      "devices" (list "files/policy-webhook-devices.yaml" "files/policy-devices.yaml")
      "load-aware" (list "files/policy-load-aware.yaml" "files/policy-load-aware.yaml") -}}
{{- $files := get $preset .Values.policy.preset -}}
{{- dict "policy-webhook.yaml" (.Values.policy.webhook | default (.Files.Get (index $files 0))) "policy.yaml" (.Values.policy.standalone | default (.Files.Get (index $files 1))) | toYaml }}
{{- end }}

{{/* A checksum of what the pods read from ConfigMaps and Secrets: a change rolls them. */}}
{{- define "se.policyChecksum" -}}
{{- if .Values.policy.existingConfigMap -}}
{{ .Values.policy.existingConfigMap | sha256sum }}
{{- else -}}
{{ include "se.policyData" . | sha256sum }}
{{- end }}
{{- end }}

{{- define "se.policyConfigMap" -}}
{{ .Values.policy.existingConfigMap | default "extender-policy" }}
{{- end }}

{{/* The restricted security contexts of deploy/; fsGroup where the pod mounts writable volumes
(pass true). */}}
{{- define "se.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
{{- if . }}
fsGroup: 65532
{{- end }}
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{- define "se.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
privileged: false
capabilities:
  drop: ["ALL"]
{{- end }}

{{/* Spread the replicas of one component over nodes. */}}
{{- define "se.spread" -}}
topologySpreadConstraints:
  - maxSkew: 1
    topologyKey: kubernetes.io/hostname
    whenUnsatisfiable: ScheduleAnyway
    labelSelector:
      matchLabels:
        app.kubernetes.io/name: {{ . }}
{{- end }}

{{/* nodeSelector, tolerations, affinity, priorityClassName and pull secrets of a component. */}}
{{- define "se.placement" -}}
{{- with .values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .values.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- with .root.Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/*
Combinations the schema cannot express, refused with one line saying what to change.
*/}}
{{- define "se.validate" -}}
{{- $v := .Values -}}
{{- if not (or $v.webhook.enabled $v.kubeScheduler.enabled $v.standalone.enabled) -}}
{{- fail "nothing to install: enable at least one of webhook.enabled, kubeScheduler.enabled, standalone.enabled" -}}
{{- end -}}
{{- if and $v.kubeScheduler.enabled (not $v.webhook.enabled) (not $v.kubeScheduler.extender.urlPrefix) -}}
{{- fail "kubeScheduler.enabled without webhook.enabled: set kubeScheduler.extender.urlPrefix to the webhook it should call" -}}
{{- end -}}
{{- if and $v.kubeScheduler.enabled (not $v.webhook.enabled) $v.webhook.tls.enabled (not $v.webhook.tls.existingSecret) -}}
{{- fail "kubeScheduler.enabled with webhook.tls.enabled but without webhook.enabled: set webhook.tls.existingSecret (or existingClientSecret) to the Secret with the webhook's ca.crt" -}}
{{- end -}}
{{- if and $v.webhook.tls.clientAuth (not $v.webhook.tls.enabled) -}}
{{- fail "webhook.tls.clientAuth (mutual TLS) needs webhook.tls.enabled" -}}
{{- end -}}
{{- if and $v.webhook.tls.existingClientSecret (not $v.webhook.tls.existingSecret) -}}
{{- fail "webhook.tls.existingClientSecret needs webhook.tls.existingSecret (a generated CA signs both sides)" -}}
{{- end -}}
{{- if and (eq $v.policy.preset "devices") $v.kubeScheduler.enabled (not $v.webhook.bind) -}}
{{- fail "policy.preset=devices with kubeScheduler.enabled needs webhook.bind: the extender binds GPU pods to write their devices" -}}
{{- end -}}
{{- if and $v.webhook.service.nodePort (ne $v.webhook.service.type "NodePort") -}}
{{- fail "webhook.service.nodePort is set but webhook.service.type is not NodePort" -}}
{{- end -}}
{{- end }}
