/**
 * A requestable denial on the wire, in the shape of AuthZEN's Access Request and Approval Profile
 * (draft), as every standard door answers it: where to request the approval, with what, until
 * when, and how to retry. The service decides whether a denial is requestable
 * (src/services/tool-call.ts); this only spells the answer, with the door's own retry hint.
 */
import type { AccessRequest } from '../services/tool-call.js';

export function accessRequestWire(requestUrl: string, a: AccessRequest, retry: Record<string, unknown>) {
  return {
    endpoint: new URL('/v1/approval-requests', requestUrl).toString(),
    evaluation_id: a.evaluation_id,
    evaluated_at: new Date(a.evaluated_at_unix_ms).toISOString(),
    expires_at: new Date(a.expires_at_unix_ms).toISOString(),
    template: 'writ.approval-request.v1',
    body: a.body,
    retry,
  };
}
