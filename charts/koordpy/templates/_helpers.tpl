{{/* The chart's name, or nameOverride. */}}
{{- define "koordpy.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Objects' names: fullnameOverride, else the release name (with the chart's name unless it has it already). */}}
{{- define "koordpy.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "koordpy.selectorLabels" -}}
app.kubernetes.io/name: {{ include "koordpy.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "koordpy.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "koordpy.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/component: scheduler
{{- end -}}

{{/*
The pods' affinity: .Values.affinity, plus a preferred anti-affinity between the chart's own pods on
podAntiAffinity.topologyKey unless that is off or .Values.affinity has a podAntiAffinity of its own.
*/}}
{{- define "koordpy.affinity" -}}
{{- $affinity := deepCopy (.Values.affinity | default dict) -}}
{{- $anti := .Values.podAntiAffinity | default dict -}}
{{- if and $anti.enabled (not (hasKey $affinity "podAntiAffinity")) -}}
{{- $term := dict "labelSelector" (dict "matchLabels" (include "koordpy.selectorLabels" . | fromYaml))
      "topologyKey" ($anti.topologyKey | default "kubernetes.io/hostname") -}}
{{- $preferred := list (dict "weight" (int ($anti.weight | default 100)) "podAffinityTerm" $term) -}}
{{- $_ := set $affinity "podAntiAffinity" (dict "preferredDuringSchedulingIgnoredDuringExecution" $preferred) -}}
{{- end -}}
{{- toYaml $affinity -}}
{{- end -}}

{{- define "koordpy.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "koordpy.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "koordpy.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/*
The SchedulerConfiguration `koordpy run --config` reads. The orderings koordpy enforces are checked
here too, so that a bad pair fails `helm install` rather than a pod in CrashLoopBackOff.
*/}}
{{- define "koordpy.config" -}}
{{- $c := .Values.config -}}
{{- $le := $c.leaderElection -}}
{{- if not (lt (float64 $le.renewDeadlineSeconds) (float64 $le.leaseDurationSeconds)) -}}
{{- fail "config.leaderElection.renewDeadlineSeconds must be less than leaseDurationSeconds" -}}
{{- end -}}
{{- if not (lt (float64 $le.retryPeriodSeconds) (float64 $le.renewDeadlineSeconds)) -}}
{{- fail "config.leaderElection.retryPeriodSeconds must be less than renewDeadlineSeconds" -}}
{{- end -}}
apiVersion: config.koordpy.io/v1alpha1
kind: SchedulerConfiguration
schedulerNames: {{ toJson $c.schedulerNames }}
preemption: {{ $c.preemption }}
podsPerCycle: {{ int $c.podsPerCycle }}
deviceGangSearchSeconds: {{ $c.deviceGangSearchSeconds }}
defaultPreemptMinRuntimeSeconds: {{ $c.defaultPreemptMinRuntimeSeconds }}
defaultPreemptionDelaySeconds: {{ $c.defaultPreemptionDelaySeconds }}
staleGangGracePeriodSeconds: {{ $c.staleGangGracePeriodSeconds }}
admittedStaleGangGracePeriodSeconds: {{ $c.admittedStaleGangGracePeriodSeconds }}
topologySources: {{ toJson $c.topologySources }}
logging:
  level: {{ $c.logging.level | quote }}
  format: {{ $c.logging.format | quote }}
leaderElection:
  enabled: {{ $le.enabled }}
  leaseName: {{ $le.leaseName | quote }}
  leaseNamespace: {{ .Release.Namespace | quote }}
  leaseDurationSeconds: {{ $le.leaseDurationSeconds }}
  renewDeadlineSeconds: {{ $le.renewDeadlineSeconds }}
  retryPeriodSeconds: {{ $le.retryPeriodSeconds }}
server:
  bindAddress: {{ printf "0.0.0.0:%d" (int $c.server.port) | quote }}
{{- end -}}
