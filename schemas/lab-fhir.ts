import { Type } from '@sinclair/typebox';

/**
 * FHIR R4 resources this API returns, outlined for the OpenAPI document: the normative shape is FHIR's own
 * (http://hl7.org/fhir/R4/diagnosticreport.html); test/lab-fhir.test.ts validates responses against its JSON schema.
 */
export const FhirDiagnosticReport = Type.Object(
  {
    resourceType: Type.Literal('DiagnosticReport'),
    id: Type.String({ description: 'The order id.' }),
    status: Type.Union([Type.Literal('final'), Type.Literal('corrected'), Type.Literal('partial')]),
    code: Type.Object({}, { additionalProperties: true, description: 'The ordered lab test.' }),
    subject: Type.Object({ reference: Type.String({ description: '`Patient/{user_id}`' }) }, { additionalProperties: true }),
    effectiveDateTime: Type.String({ description: 'When the sample was collected.' }),
    issued: Type.String({ description: 'When the results were reported.' }),
    contained: Type.Array(Type.Object({ resourceType: Type.Literal('Observation') }, { additionalProperties: true }), {
      description:
        'One Observation per result (LOINC code, valueQuantity in UCUM where the unit maps, referenceRange, v3-ObservationInterpretation code, ' +
        'status final/corrected/preliminary) and one `cancelled` Observation with a dataAbsentReason per missing result.',
    }),
    result: Type.Array(Type.Object({ reference: Type.String({ description: '`#<contained id>`' }) })),
  },
  { $id: 'FhirDiagnosticReport', additionalProperties: true, description: 'A FHIR R4 DiagnosticReport (application/fhir+json).' },
);
