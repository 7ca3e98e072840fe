import { Type } from '@sinclair/typebox';
import { Timestamp, Uuid } from './common';

/** The delivery-log page's sign-in links and sessions (api/routes/console.ts). */

export const ConsoleLink = Type.Object(
  {
    url: Type.String({
      description: 'Opens the delivery-log page signed in to this team, once. The token is in the fragment (#link=…), which browsers never send.',
    }),
    expires_at: Timestamp('The link works once, until then (15 minutes).'),
  },
  { $id: 'ConsoleLink' },
);

export const ConsoleSessionBody = Type.Object(
  { link: Type.String({ minLength: 1, maxLength: 200, description: 'The token of a link (the part after #link=).' }) },
  { additionalProperties: false, $id: 'ConsoleSessionBody' },
);

export const ConsoleSession = Type.Object(
  {
    token: Type.String({
      description: 'Send as `Authorization: Bearer <token>` on the management API of this team (as a team-scoped key of the key that made the link).',
    }),
    expires_at: Timestamp('The session ends then (an hour after the link was used).'),
    org_id: Uuid(),
    team_id: Uuid(),
    environment: Type.String(),
  },
  { $id: 'ConsoleSession' },
);
