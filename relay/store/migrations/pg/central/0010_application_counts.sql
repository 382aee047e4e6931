-- When each application's counts last arrived, per environment (the web page's
-- applications: counts that come through a relay name applications, not instances, so an
-- instance's last seen cannot move with them). Written with the counts; forgotten with the
-- instances not seen for a week.

CREATE TABLE application_counts (
    app_name TEXT NOT NULL,
    environment TEXT NOT NULL,
    arrived DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (app_name, environment)
);
