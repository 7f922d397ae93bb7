-- Which of its owner's statements recorded a fire: an owner that lost the
-- answer to a statement asks again, and is admitted only the fires that
-- statement recorded.
ALTER TABLE {{schema}}.fires ADD COLUMN batch BIGINT NOT NULL DEFAULT 0;
