/**
 * Strava's `sport_type` (and the deprecated `type`, whose values are a subset) → our workout sport {id, name, slug}.
 * The Strava values are the SportType enum of the official spec (stravalib/stravalib `src/stravalib/strava_model.py`
 * SportType, generated from the swagger). Our ids are Healthbridge's own: running 1, cycling 2 and walking 3 as in
 * the demo generator (lib/wearables/demo-world.ts SPORTS), the rest numbered here once and never reused.
 */
export interface Sport {
  id: number;
  name: string;
  slug: string;
}

const TABLE: [stravaSportType: string, id: number, name: string, slug: string][] = [
  ['Run', 1, 'Running', 'running'],
  ['Ride', 2, 'Cycling', 'cycling'],
  ['Walk', 3, 'Walking', 'walking'],
  ['TrailRun', 4, 'Trail Running', 'trail_running'],
  ['VirtualRun', 5, 'Virtual Running', 'virtual_running'],
  ['MountainBikeRide', 6, 'Mountain Biking', 'mountain_biking'],
  ['GravelRide', 7, 'Gravel Cycling', 'gravel_cycling'],
  ['EBikeRide', 8, 'E-Biking', 'e_biking'],
  ['EMountainBikeRide', 9, 'E-Mountain Biking', 'e_mountain_biking'],
  ['VirtualRide', 10, 'Indoor Cycling', 'indoor_cycling'],
  ['Handcycle', 11, 'Handcycling', 'handcycling'],
  ['Velomobile', 12, 'Velomobile', 'velomobile'],
  ['Swim', 13, 'Swimming', 'swimming'],
  ['Hike', 14, 'Hiking', 'hiking'],
  ['AlpineSki', 15, 'Alpine Skiing', 'alpine_skiing'],
  ['BackcountrySki', 16, 'Backcountry Skiing', 'backcountry_skiing'],
  ['NordicSki', 17, 'Cross-Country Skiing', 'cross_country_skiing'],
  ['Snowboard', 18, 'Snowboarding', 'snowboarding'],
  ['Snowshoe', 19, 'Snowshoeing', 'snowshoeing'],
  ['IceSkate', 20, 'Ice Skating', 'ice_skating'],
  ['InlineSkate', 21, 'Inline Skating', 'inline_skating'],
  ['RollerSki', 22, 'Roller Skiing', 'roller_skiing'],
  ['Rowing', 23, 'Rowing', 'rowing'],
  ['VirtualRow', 24, 'Indoor Rowing', 'indoor_rowing'],
  ['Kayaking', 25, 'Kayaking', 'kayaking'],
  ['Canoeing', 26, 'Canoeing', 'canoeing'],
  ['StandUpPaddling', 27, 'Stand-Up Paddling', 'stand_up_paddling'],
  ['Surfing', 28, 'Surfing', 'surfing'],
  ['Kitesurf', 29, 'Kitesurfing', 'kitesurfing'],
  ['Windsurf', 30, 'Windsurfing', 'windsurfing'],
  ['Sail', 31, 'Sailing', 'sailing'],
  ['WeightTraining', 32, 'Strength Training', 'strength_training'],
  ['Crossfit', 33, 'CrossFit', 'crossfit'],
  ['HighIntensityIntervalTraining', 34, 'HIIT', 'hiit'],
  ['Yoga', 35, 'Yoga', 'yoga'],
  ['Pilates', 36, 'Pilates', 'pilates'],
  ['Elliptical', 37, 'Elliptical', 'elliptical'],
  ['StairStepper', 38, 'Stair Stepper', 'stair_stepper'],
  ['RockClimbing', 39, 'Rock Climbing', 'rock_climbing'],
  ['Golf', 40, 'Golf', 'golf'],
  ['Skateboard', 41, 'Skateboarding', 'skateboarding'],
  ['Soccer', 42, 'Soccer', 'soccer'],
  ['Tennis', 43, 'Tennis', 'tennis'],
  ['TableTennis', 44, 'Table Tennis', 'table_tennis'],
  ['Badminton', 45, 'Badminton', 'badminton'],
  ['Squash', 46, 'Squash', 'squash'],
  ['Racquetball', 47, 'Racquetball', 'racquetball'],
  ['Pickleball', 48, 'Pickleball', 'pickleball'],
  ['Padel', 49, 'Padel', 'padel'],
  ['Basketball', 50, 'Basketball', 'basketball'],
  ['Volleyball', 51, 'Volleyball', 'volleyball'],
  ['Cricket', 52, 'Cricket', 'cricket'],
  ['Dance', 53, 'Dance', 'dance'],
  ['PhysicalTherapy', 54, 'Physical Therapy', 'physical_therapy'],
  ['Wheelchair', 55, 'Wheelchair', 'wheelchair'],
  ['Workout', 56, 'Workout', 'workout'],
];

const BY_STRAVA = new Map(TABLE.map(([strava, id, name, slug]) => [strava, { id, name, slug }]));
/** A sport_type Strava added after this table was written. */
export const OTHER_SPORT: Sport = { id: 0, name: 'Other', slug: 'other' };

/** The sport of an activity: `sport_type` first (the preferred field since June 2022), then the legacy `type`. */
export function sportOf(sportType: string | null | undefined, legacyType?: string | null): Sport {
  return BY_STRAVA.get(sportType ?? '') ?? BY_STRAVA.get(legacyType ?? '') ?? OTHER_SPORT;
}
