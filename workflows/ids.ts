/** Workflow ids are prefixed business keys, built only here (api and workflows import these). */
export const workflowIds = {
  userDeletion: (userId: string) => `user-deletion:${userId}`,
} as const;
